package config

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"reflect"
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

// Bounds on a config file, checked before decoding so a hostile file
// cannot make `svc check` spend minutes or gigabytes.
const (
	maxConfigBytes = 1 << 20
	maxConfigDepth = 32
)

// Parse decodes TOML bytes on top of Default. String values expand
// ${VAR} and ${VAR:-default} through lookup; an expanded string may fill an
// integer, float or boolean key. Syntax errors, unknown keys, values of the
// wrong type and every validation problem are returned together as a
// *Error, each naming its key and, when known, its line.
func Parse(data []byte, lookup func(string) (string, bool)) (*Config, error) {
	if len(data) > maxConfigBytes {
		return nil, &Error{Problems: []string{fmt.Sprintf("the file is %d bytes; a config holds at most %d", len(data), maxConfigBytes)}}
	}
	text := string(data)
	if d := nestingDepth(text); d > maxConfigDepth {
		return nil, &Error{Problems: []string{fmt.Sprintf("tables, arrays or dotted keys nest %d deep; at most %d levels are accepted", d, maxConfigDepth)}}
	}
	var raw map[string]any
	if _, err := toml.Decode(text, &raw); err != nil {
		return nil, &Error{Problems: []string{syntaxProblem(text, err)}}
	}
	lines := keyLines(text)
	expanded := map[string]bool{}
	var problems []string
	raw = expandAll(raw, "", lookup, &problems, expanded, lines).(map[string]any)
	tc := typeChecker{lines: lines, expanded: expanded}
	tc.table(raw, reflect.TypeFor[Config](), "")
	problems = append(problems, tc.problems...)
	var buf bytes.Buffer
	if err := toml.NewEncoder(&buf).Encode(raw); err != nil {
		return nil, &Error{Problems: append(problems, "re-encode after expansion: "+err.Error())}
	}
	cfg := Default()
	md, err := toml.Decode(buf.String(), &cfg)
	if err != nil {
		return nil, &Error{Problems: append(problems, tomlProblem(err))}
	}
	for _, k := range md.Undecoded() {
		problems = append(problems, locate(lines, k.String())+": unknown key")
	}
	cfg.Resolve()
	for _, p := range cfg.Validate() {
		problems = append(problems, withLine(lines, p))
	}
	if len(problems) > 0 {
		return nil, &Error{Problems: problems}
	}
	return &cfg, nil
}

// withLine adds the line of a validation problem's key: "key: msg" becomes
// "key (line N): msg".
func withLine(lines map[string]int, problem string) string {
	key, msg, ok := strings.Cut(problem, ": ")
	if !ok || strings.ContainsAny(key, " (") {
		return problem
	}
	return locate(lines, key) + ": " + msg
}

// syntaxProblem renders a TOML syntax error with the line of the offending
// character (the decoder counts a newline it did not expect on the next
// line).
func syntaxProblem(text string, err error) string {
	var pe toml.ParseError
	if errors.As(err, &pe) && pe.Position.Start >= 0 && pe.Position.Start <= len(text) {
		return fmt.Sprintf("line %d: %s", strings.Count(text[:pe.Position.Start], "\n")+1, pe.Message)
	}
	return tomlProblem(err)
}

// tomlProblem renders a decode error with its line.
func tomlProblem(err error) string {
	var pe toml.ParseError
	if errors.As(err, &pe) {
		if pe.Position.Line > 0 {
			return fmt.Sprintf("line %d: %s", pe.Position.Line, pe.Message)
		}
		if pe.LastKey != "" {
			return fmt.Sprintf("%s: %s", pe.LastKey, pe.Message)
		}
		return pe.Message
	}
	return strings.TrimPrefix(err.Error(), "toml: ")
}

var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(:-([^}]*))?\}`)

// expandAll walks a decoded TOML tree and expands ${VAR} in every string,
// recording in expanded the key paths of the strings that held a reference.
func expandAll(v any, key string, lookup func(string) (string, bool), problems *[]string, expanded map[string]bool, lines map[string]int) any {
	switch t := v.(type) {
	case string:
		if !strings.Contains(t, "${") {
			return t
		}
		expanded[key] = true
		return envRef.ReplaceAllStringFunc(t, func(ref string) string {
			m := envRef.FindStringSubmatch(ref)
			if val, ok := lookup(m[1]); ok {
				return val
			}
			if m[2] != "" {
				return m[3]
			}
			*problems = append(*problems, fmt.Sprintf("%s: environment variable %s is not set (use ${%s:-default} for a fallback)", locate(lines, key), m[1], m[1]))
			return ""
		})
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			t[k] = expandAll(t[k], joinPath(key, k), lookup, problems, expanded, lines)
		}
		return t
	case []map[string]any:
		for i := range t {
			t[i] = expandAll(t[i], fmt.Sprintf("%s[%d]", key, i), lookup, problems, expanded, lines).(map[string]any)
		}
		return t
	case []any:
		for i := range t {
			t[i] = expandAll(t[i], fmt.Sprintf("%s[%d]", key, i), lookup, problems, expanded, lines)
		}
		return t
	}
	return v
}
