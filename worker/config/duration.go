package config

import (
	"fmt"
	"strings"
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

// MarshalText writes the duration in its shortest Go syntax: "10m", "1h30m",
// "500ms" (never "10m0s"), so every view shows one format that loads back.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// String is the shortest Go syntax of d.
func (d Duration) String() string {
	s := time.Duration(d).String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
