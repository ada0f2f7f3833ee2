package config

import (
	"fmt"
	"time"
)

// Duration is a time.Duration written in TOML as a string such as "30s".
type Duration time.Duration

// D returns the value as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// UnmarshalText parses a Go duration string.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("invalid duration %q (want e.g. \"30s\", \"500ms\", \"10m\")", b)
	}
	*d = Duration(v)
	return nil
}

// MarshalText writes the duration in Go syntax.
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }
