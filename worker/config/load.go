package config

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"os"
	"reflect"
	"regexp"
	"slices"
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

// A Check validates keys of a loaded config that another package owns (ui's
// link bases, release tag, declared pages), returning "key: message"s.
type Check func(*Config) []string

// LoadFile reads, expands, decodes and validates the TOML file at path,
// with Validate and every check.
func LoadFile(path string, checks ...Check) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	cfg, err := Parse(data, os.LookupEnv, checks...)
	var ce *Error
	if errors.As(err, &ce) {
		ce.Path = path
	}
	return cfg, err
}

// Bounds on a config file, checked before decoding a hostile one.
const (
	maxConfigBytes = 1 << 20
	maxConfigDepth = 32
)

// Parse decodes TOML bytes on top of Default, expanding ${VAR} and
// ${VAR:-default} through lookup (an expanded string may fill a number or
// boolean key). Every problem, of the syntax, keys, types, Validate and the
// checks, comes in one *Error, naming its key and, when known, its line.
func Parse(data []byte, lookup func(string) (string, bool), checks ...Check) (*Config, error) {
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
	// The checker removed every unknown key; plain tables are DecodeTables'.
	if _, err := toml.Decode(buf.String(), &cfg); err != nil {
		return nil, &Error{Problems: append(problems, tomlProblem(err))}
	}
	cfg.Resolve()
	cfg.src = &source{lines: lines, expanded: expanded}
	for _, p := range cfg.Validate() {
		problems = append(problems, withLine(lines, p))
	}
	for _, check := range checks {
		for _, p := range check(&cfg) {
			problems = append(problems, withLine(lines, p))
		}
	}
	if len(problems) > 0 {
		return nil, &Error{Problems: problems}
	}
	return &cfg, nil
}

// source is where a loaded config's keys came from: their lines and the
// key paths whose string value held a ${VAR}.
type source struct {
	lines    map[string]int
	expanded map[string]bool
}

// DecodeTables decodes plain tables this config keeps for another package
// (handler.ui_pages, handler.probe_details) into v, a pointer to that
// package's type, with the loader's rules and problems under path.
// Offending keys are left out and decoding goes on.
func (c *Config) DecodeTables(path string, tables, v any) []string {
	if rv := reflect.ValueOf(tables); !rv.IsValid() || rv.IsZero() {
		return nil
	}
	// A copy through TOML: the checker edits the tree it walks.
	var buf bytes.Buffer
	if err := toml.NewEncoder(&buf).Encode(map[string]any{"v": tables}); err != nil {
		return []string{path + ": " + err.Error()}
	}
	var raw map[string]any
	if _, err := toml.Decode(buf.String(), &raw); err != nil {
		return []string{path + ": " + tomlProblem(err)}
	}
	tc := typeChecker{}
	if c.src != nil {
		tc.lines, tc.expanded = c.src.lines, c.src.expanded
	}
	t := reflect.TypeOf(v).Elem()
	if val, ok := tc.value(raw["v"], t, path); ok {
		raw["v"] = val
	} else {
		delete(raw, "v")
	}
	buf.Reset()
	if err := toml.NewEncoder(&buf).Encode(raw); err != nil {
		return append(tc.problems, path+": "+err.Error())
	}
	into := reflect.New(reflect.StructOf([]reflect.StructField{{Name: "V", Type: t, Tag: `toml:"v"`}}))
	md, err := toml.Decode(buf.String(), into.Interface())
	if err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			return append(tc.problems, path+": "+pe.Message)
		}
		return append(tc.problems, path+": "+tomlProblem(err))
	}
	for _, k := range md.Undecoded() {
		tc.add(joinPath(path, k[1:].String()), "unknown key")
	}
	reflect.ValueOf(v).Elem().Set(into.Elem().Field(0))
	return tc.problems
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
// character (the decoder's line is off by one for an unexpected newline).
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
		for _, k := range slices.Sorted(maps.Keys(t)) {
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
