package ui

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// MarshalJSON writes a list of names when every column is bare, else an
// object of name to Column in declaration order.
func (cs Columns) MarshalJSON() ([]byte, error) {
	if cs == nil {
		return []byte("null"), nil
	}
	allBare := true
	for _, c := range cs {
		allBare = allBare && c.bare()
	}
	if allBare {
		return json.Marshal(cs.Names())
	}
	b := []byte{'{'}
	for i, c := range cs {
		if i > 0 {
			b = append(b, ',')
		}
		k, _ := json.Marshal(c.Name) // a string always marshals
		v, err := json.Marshal(c)
		if err != nil {
			return nil, err
		}
		b = append(b, k...)
		b = append(b, ':')
		b = append(b, v...)
	}
	return append(b, '}'), nil
}

// UnmarshalJSON reads either wire form, keeping the object's key order.
func (cs *Columns) UnmarshalJSON(data []byte) error {
	data = bytes.TrimSpace(data)
	switch {
	case bytes.Equal(data, []byte("null")):
		*cs = nil
		return nil
	case len(data) > 0 && data[0] == '[':
		var names []string
		if err := json.Unmarshal(data, &names); err != nil {
			return fmt.Errorf("columns: a list must hold column names: %w", err)
		}
		out := make(Columns, len(names))
		for i, n := range names {
			out[i] = Column{Name: n}
		}
		*cs = out
		return nil
	case len(data) > 0 && data[0] == '{':
		return cs.unmarshalObject(data)
	}
	return errors.New("columns: want a list of names or an object of name to column")
}

func (cs *Columns) unmarshalObject(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	if _, err := dec.Token(); err != nil { // the opening brace
		return fmt.Errorf("columns: %w", err)
	}
	out := Columns{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return fmt.Errorf("columns: %w", err)
		}
		name, _ := tok.(string) // object keys are always strings
		var c Column
		if err := dec.Decode(&c); err != nil {
			return fmt.Errorf("columns.%s: %w", name, err)
		}
		c.Name = name
		out = append(out, c)
	}
	*cs = out
	return nil
}

// UnmarshalTOML reads `columns = ["a", "b"]` or `[[...columns]]` tables with
// a name key. Unknown keys are errors, as everywhere in the config.
func (cs *Columns) UnmarshalTOML(data any) error {
	var items []any
	switch v := data.(type) {
	case []any:
		items = v
	case []map[string]any:
		for _, m := range v {
			items = append(items, m)
		}
	case map[string]any:
		return errors.New("columns must be a list to keep their order: columns = [\"a\", \"b\"] or [[...columns]] tables with name = \"a\"")
	default:
		return fmt.Errorf("columns must be a list of names or of tables, not %T", data)
	}
	out := make(Columns, 0, len(items))
	names := 0
	for _, item := range items {
		if _, ok := item.(string); ok {
			names++
		}
	}
	if names > 0 && names < len(items) { // a mix hides its tables' keys from the unknown-key check
		return errors.New("columns must be all names or all tables, not a mix")
	}
	for i, item := range items {
		switch v := item.(type) {
		case string:
			out = append(out, Column{Name: v})
		case map[string]any:
			c, err := columnFromTOML(v)
			if err != nil {
				return fmt.Errorf("columns[%d].%w", i, err)
			}
			out = append(out, c)
		default:
			return fmt.Errorf("columns[%d] must be a name or a table, not %T", i, item)
		}
	}
	*cs = out
	return nil
}

// columnFromTOML decodes one column table strictly; errors start with the
// key they concern so the caller can prefix the location.
func columnFromTOML(m map[string]any) (Column, error) {
	var c Column
	strs := map[string]*string{"name": &c.Name, "label": &c.Label, "link_template": &c.LinkTemplate,
		"format": &c.Format, "hint": &c.Hint, "renderer": &c.Renderer}
	for _, k := range sortedKeys(m) {
		v := m[k]
		dst, ok := strs[k]
		switch {
		case k == "badge_colors":
			colors, err := stringMap(v)
			if err != nil {
				return c, fmt.Errorf("badge_colors: %w", err)
			}
			c.BadgeColors = colors
			continue
		case !ok:
			return c, fmt.Errorf("%s: unknown key", k)
		}
		s, ok := v.(string)
		if !ok {
			return c, fmt.Errorf("%s: must be a string, not %T", k, v)
		}
		*dst = s
	}
	return c, nil
}

func stringMap(v any) (map[string]string, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("must be a table of value = color, not %T", v)
	}
	out := make(map[string]string, len(m))
	for k, x := range m {
		s, ok := x.(string)
		if !ok {
			return nil, fmt.Errorf("%q: color must be a string, not %T", k, x)
		}
		out[k] = s
	}
	return out, nil
}
