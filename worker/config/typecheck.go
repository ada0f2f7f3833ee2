package config

import (
	"encoding"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
)

var (
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
	tomlUnmarshaler = reflect.TypeFor[toml.Unmarshaler]()
	durationType    = reflect.TypeFor[Duration]()
)

// typeChecker walks a decoded TOML tree against the Config struct before
// it is decoded for real, so every unknown key and wrong type is reported
// at once; offending keys are removed so decoding goes on. A string from
// ${VAR} expansion is converted when its key wants a number or boolean.
type typeChecker struct {
	lines    map[string]int
	expanded map[string]bool // key paths whose string value held a ${VAR}
	problems []string
}

func (c *typeChecker) add(path, format string, args ...any) {
	c.problems = append(c.problems, locate(c.lines, path)+": "+fmt.Sprintf(format, args...))
}

// locate renders a key path with its line when known: "ui.port (line 5)".
func locate(lines map[string]int, path string) string {
	if n, ok := lines[path]; ok {
		return fmt.Sprintf("%s (line %d)", path, n)
	}
	return path
}

// table checks the keys of raw against struct type t.
func (c *typeChecker) table(raw map[string]any, t reflect.Type, path string) {
	fields := tomlFields(t)
	for _, k := range slices.Sorted(maps.Keys(raw)) {
		p := joinPath(path, k)
		ft, ok := fields[k]
		if !ok {
			c.add(p, "unknown key")
			delete(raw, k)
			continue
		}
		v, ok := c.value(raw[k], ft, p)
		if !ok {
			delete(raw, k)
			continue
		}
		raw[k] = v
	}
}

// tomlFields maps the toml tag names of struct type t to field types.
func tomlFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
		if name == "" || name == "-" || !f.IsExported() {
			continue
		}
		out[name] = f.Type
	}
	return out
}

// value checks one value against type t; it returns the (possibly
// converted) value and false when the key must be dropped.
func (c *typeChecker) value(v any, t reflect.Type, path string) (any, bool) {
	if reflect.PointerTo(t).Implements(tomlUnmarshaler) {
		return v, true // the type reads its own shapes and reports its own errors
	}
	if t == durationType {
		s, ok := v.(string)
		if !ok {
			c.add(path, "want a duration string such as \"30s\", \"500ms\" or \"10m\", got %s", describe(v))
			return nil, false
		}
		if _, err := time.ParseDuration(s); err != nil {
			c.add(path, "invalid duration %q (want e.g. \"30s\", \"500ms\", \"10m\")", s)
			return nil, false
		}
		return v, true
	}
	if reflect.PointerTo(t).Implements(textUnmarshaler) {
		if _, ok := v.(string); !ok {
			c.add(path, "want a string, got %s", describe(v))
			return nil, false
		}
		return v, true
	}
	switch t.Kind() {
	case reflect.Pointer:
		return c.value(v, t.Elem(), path)
	case reflect.String:
		if _, ok := v.(string); !ok {
			c.add(path, "want a string, got %s", describe(v))
			return nil, false
		}
	case reflect.Bool:
		if s, ok := v.(string); ok && c.expanded[path] {
			b, err := strconv.ParseBool(strings.TrimSpace(s))
			if err != nil {
				c.add(path, "want a boolean, got %q from the environment", s)
				return nil, false
			}
			return b, true
		}
		if _, ok := v.(bool); !ok {
			c.add(path, "want a boolean (true or false), got %s", describe(v))
			return nil, false
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if s, ok := v.(string); ok && c.expanded[path] {
			n, err := strconv.ParseInt(strings.TrimSpace(s), 10, t.Bits())
			if err != nil {
				c.add(path, "want an integer, got %q from the environment", s)
				return nil, false
			}
			return n, true
		}
		n, ok := v.(int64)
		if !ok {
			c.add(path, "want an integer, got %s", describe(v))
			return nil, false
		}
		if reflect.New(t).Elem().OverflowInt(n) {
			c.add(path, "%d is out of range", n)
			return nil, false
		}
	case reflect.Float32, reflect.Float64:
		switch x := v.(type) {
		case float64:
		case int64:
			return float64(x), true
		case string:
			if !c.expanded[path] {
				c.add(path, "want a number, got %s", describe(v))
				return nil, false
			}
			f, err := strconv.ParseFloat(strings.TrimSpace(x), 64)
			if err != nil {
				c.add(path, "want a number, got %q from the environment", x)
				return nil, false
			}
			return f, true
		default:
			c.add(path, "want a number, got %s", describe(v))
			return nil, false
		}
	case reflect.Slice:
		return c.slice(v, t, path)
	case reflect.Map:
		m, ok := v.(map[string]any)
		if !ok {
			c.add(path, "want a table, got %s", describe(v))
			return nil, false
		}
		for k, e := range m {
			ev, ok := c.value(e, t.Elem(), joinPath(path, k))
			if !ok {
				delete(m, k)
				continue
			}
			m[k] = ev
		}
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			c.add(path, "want a table, got %s", describe(v))
			return nil, false
		}
		c.table(m, t, path)
	}
	return v, true
}

// slice checks an array (or array of tables) element by element.
func (c *typeChecker) slice(v any, t reflect.Type, path string) (any, bool) {
	var elems []any
	switch x := v.(type) {
	case []any:
		elems = x
	case []map[string]any:
		for _, m := range x {
			elems = append(elems, m)
		}
	default:
		c.add(path, "want an array, got %s", describe(v))
		return nil, false
	}
	out := make([]any, 0, len(elems))
	ok := true
	for i, e := range elems {
		ev, good := c.value(e, t.Elem(), fmt.Sprintf("%s[%d]", path, i))
		ok = ok && good
		out = append(out, ev)
	}
	if !ok {
		return nil, false // keep indexes stable: drop the whole array
	}
	if t.Elem().Kind() == reflect.Struct {
		tables := make([]map[string]any, len(out))
		for i, e := range out {
			tables[i], _ = e.(map[string]any)
		}
		return tables, true
	}
	return out, true
}

// describe names a decoded TOML value by its TOML type.
func describe(v any) string {
	switch x := v.(type) {
	case string:
		if len(x) > 40 {
			x = x[:40] + "…"
		}
		return fmt.Sprintf("a string (%q)", x)
	case int64:
		return fmt.Sprintf("an integer (%d)", x)
	case float64:
		return fmt.Sprintf("a float (%g)", x)
	case bool:
		return fmt.Sprintf("a boolean (%v)", x)
	case time.Time:
		return "a datetime"
	case []any:
		return "an array"
	case []map[string]any:
		return "an array of tables"
	case map[string]any:
		return "a table"
	}
	return fmt.Sprintf("a %T", v)
}
