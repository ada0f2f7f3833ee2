package config

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"

	"github.com/BurntSushi/toml"
)

// Error lists every problem found while loading a configuration.
type Error struct {
	Path     string
	Problems []string
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.Path != "" {
		fmt.Fprintf(&b, "config %s: ", e.Path)
	} else {
		b.WriteString("config: ")
	}
	fmt.Fprintf(&b, "%d problem(s):", len(e.Problems))
	for _, p := range e.Problems {
		b.WriteString("\n  - ")
		b.WriteString(p)
	}
	return b.String()
}

// LoadFile reads, expands, decodes and validates the TOML file at path.
func LoadFile(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	cfg, err := Parse(data, os.LookupEnv)
	var ce *Error
	if errors.As(err, &ce) {
		ce.Path = path
	}
	return cfg, err
}

// Parse decodes TOML bytes on top of Default. String values expand
// ${VAR} and ${VAR:-default} through lookup. Unknown keys, type errors and
// every validation problem are returned together as a *Error.
func Parse(data []byte, lookup func(string) (string, bool)) (*Config, error) {
	var raw map[string]any
	if _, err := toml.Decode(string(data), &raw); err != nil {
		return nil, &Error{Problems: []string{tomlProblem(err)}}
	}
	var problems []string
	raw = expandAll(raw, "", lookup, &problems).(map[string]any)
	if len(problems) > 0 {
		return nil, &Error{Problems: problems}
	}
	var buf bytes.Buffer
	if err := toml.NewEncoder(&buf).Encode(raw); err != nil {
		return nil, &Error{Problems: []string{"re-encode after expansion: " + err.Error()}}
	}
	cfg := Default()
	md, err := toml.Decode(buf.String(), &cfg)
	if err != nil {
		return nil, &Error{Problems: []string{tomlProblem(err)}}
	}
	for _, k := range md.Undecoded() {
		problems = append(problems, fmt.Sprintf("%s: unknown key", k.String()))
	}
	cfg.Resolve()
	problems = append(problems, cfg.Validate()...)
	if len(problems) > 0 {
		return nil, &Error{Problems: problems}
	}
	return &cfg, nil
}

// tomlProblem renders a decode error naming the key rather than a line of
// the re-encoded text.
func tomlProblem(err error) string {
	var pe toml.ParseError
	if errors.As(err, &pe) {
		if pe.LastKey != "" {
			return fmt.Sprintf("%s: %s", pe.LastKey, pe.Message)
		}
		return fmt.Sprintf("line %d: %s", pe.Position.Line, pe.Message)
	}
	msg := err.Error()
	return strings.TrimPrefix(msg, "toml: ")
}

var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(:-([^}]*))?\}`)

// expandAll walks a decoded TOML tree and expands ${VAR} in every string.
func expandAll(v any, key string, lookup func(string) (string, bool), problems *[]string) any {
	switch t := v.(type) {
	case string:
		return envRef.ReplaceAllStringFunc(t, func(ref string) string {
			m := envRef.FindStringSubmatch(ref)
			if val, ok := lookup(m[1]); ok {
				return val
			}
			if m[2] != "" {
				return m[3]
			}
			*problems = append(*problems, fmt.Sprintf("%s: environment variable %s is not set (use ${%s:-default} for a fallback)", key, m[1], m[1]))
			return ""
		})
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			t[k] = expandAll(t[k], joinKey(key, k), lookup, problems)
		}
		return t
	case []map[string]any:
		for i := range t {
			t[i] = expandAll(t[i], fmt.Sprintf("%s[%d]", key, i), lookup, problems).(map[string]any)
		}
		return t
	case []any:
		for i := range t {
			t[i] = expandAll(t[i], fmt.Sprintf("%s[%d]", key, i), lookup, problems)
		}
		return t
	}
	return v
}

func joinKey(prefix, k string) string {
	if prefix == "" {
		return k
	}
	return prefix + "." + k
}
