package ui

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Template is a parsed link or text template: literal text with tokens
// {value} (the field's own value), {row.<field>} (another field of the same
// row) and {<base>} (a URL prefix from ui.link_bases). Braces are always
// token delimiters; there is no escape.
type Template struct {
	raw   string
	parts []part
}

type partKind int

const (
	partText partKind = iota
	partValue
	partRow
	partBase
)

type part struct {
	kind partKind
	text string // literal text, row field or base name
}

// MaxTemplateLen bounds a template's length in bytes.
const MaxTemplateLen = 2048

var (
	basePattern     = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
	rowFieldPattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)
)

// ErrTemplate marks a template that does not parse.
var ErrTemplate = errors.New("malformed template")

// ParseTemplate parses s. Errors wrap ErrTemplate and say what is wrong.
func ParseTemplate(s string) (Template, error) {
	t := Template{raw: s}
	if len(s) > MaxTemplateLen {
		return t, fmt.Errorf("%w: longer than %d bytes", ErrTemplate, MaxTemplateLen)
	}
	rest := s
	for rest != "" {
		open := strings.IndexAny(rest, "{}")
		if open < 0 {
			t.parts = append(t.parts, part{partText, rest})
			break
		}
		if rest[open] == '}' {
			return t, fmt.Errorf("%w: '}' at byte %d has no '{'", ErrTemplate, len(s)-len(rest)+open)
		}
		if open > 0 {
			t.parts = append(t.parts, part{partText, rest[:open]})
		}
		end := strings.IndexAny(rest[open+1:], "{}")
		if end < 0 || rest[open+1+end] == '{' {
			return t, fmt.Errorf("%w: '{' at byte %d is not closed", ErrTemplate, len(s)-len(rest)+open)
		}
		tok := rest[open+1 : open+1+end]
		p, err := parseToken(tok)
		if err != nil {
			return t, err
		}
		t.parts = append(t.parts, p)
		rest = rest[open+1+end+1:]
	}
	return t, nil
}

func parseToken(tok string) (part, error) {
	switch {
	case tok == "value":
		return part{partValue, ""}, nil
	case strings.HasPrefix(tok, "row."):
		f := tok[len("row."):]
		if !rowFieldPattern.MatchString(f) {
			return part{}, fmt.Errorf("%w: unknown token shape {%s}: a row field is letters, digits, '_' or '-'", ErrTemplate, tok)
		}
		return part{partRow, f}, nil
	case basePattern.MatchString(tok):
		return part{partBase, tok}, nil
	}
	return part{}, fmt.Errorf("%w: unknown token shape {%s}: want {value}, {row.<field>} or {<base>}", ErrTemplate, tok)
}

// String returns the template as written.
func (t Template) String() string { return t.raw }

// RowFields returns the row fields the template reads, in order.
func (t Template) RowFields() []string { return t.names(partRow) }

// Bases returns the link bases the template reads, in order.
func (t Template) Bases() []string { return t.names(partBase) }

func (t Template) names(k partKind) []string {
	var out []string
	for _, p := range t.parts {
		if p.kind == k {
			out = append(out, p.text)
		}
	}
	return out
}

// linkStart reports whether a link template starts with a base token or an
// absolute http(s) or same-origin path, so a link can never become
// javascript: or data: whatever the values are.
func (t Template) linkStart() bool {
	if len(t.parts) == 0 {
		return false
	}
	p := t.parts[0]
	if p.kind == partBase {
		return true
	}
	return p.kind == partText && safeLinkPrefix(p.text)
}

func safeLinkPrefix(s string) bool {
	return strings.HasPrefix(s, "https://") || strings.HasPrefix(s, "http://") ||
		(strings.HasPrefix(s, "/") && !strings.HasPrefix(s, "//"))
}

// Values is what a template expands with.
type Values struct {
	Value any            // {value}; nil leaves it unresolved
	Row   map[string]any // {row.<field>}; a missing field leaves it unresolved
	Bases map[string]string
}

// ExpandURL expands a link template: {value} and {row.*} substitutions are
// percent-encoded (everything but A-Z a-z 0-9 - . _ ~), bases are inserted
// verbatim without their trailing '/'. ok is false when a token cannot be
// resolved or the result is not an http(s) or same-origin link; the caller
// then renders plain text, never a dead anchor.
func (t Template) ExpandURL(v Values) (string, bool) {
	s, ok := t.expand(v, true)
	if !ok || !safeLinkPrefix(s) {
		return "", false
	}
	return s, true
}

// ExpandText expands a hint or detail title: substitutions are unencoded.
func (t Template) ExpandText(v Values) (string, bool) { return t.expand(v, false) }

func (t Template) expand(v Values, encode bool) (string, bool) {
	var b strings.Builder
	for _, p := range t.parts {
		switch p.kind {
		case partText:
			b.WriteString(p.text)
		case partBase:
			base, ok := v.Bases[p.text]
			if !ok {
				return "", false
			}
			b.WriteString(strings.TrimRight(base, "/"))
		case partValue, partRow:
			raw := v.Value
			if p.kind == partRow {
				var ok bool
				if raw, ok = v.Row[p.text]; !ok {
					return "", false
				}
			}
			s, ok := scalarText(raw)
			if !ok {
				return "", false
			}
			if encode {
				s = PercentEncode(s)
			}
			b.WriteString(s)
		}
	}
	return b.String(), true
}

// scalarText renders a decoded JSON value as template text; null has none.
func scalarText(v any) (string, bool) {
	switch x := v.(type) {
	case nil:
		return "", false
	case string:
		return x, true
	case bool:
		return strconv.FormatBool(x), true
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64), true
	case json.Number:
		return x.String(), true
	case int:
		return strconv.Itoa(x), true
	case int64:
		return strconv.FormatInt(x, 10), true
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "", false
	}
	return string(b), true
}

// PercentEncode escapes every byte outside the RFC 3986 unreserved set, so
// a value is safe in any URL part (path segment, query key or value).
func PercentEncode(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}
