package ui

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// Template is a parsed link or text template: literal text with tokens
// {value} (the field's own value), {row.<field>} (another field of the same
// row) and {<base>} (a URL prefix from ui.link_bases). Braces are always
// token delimiters; there is no escape. The browser expands templates
// (web/assets/render.js); this side validates them.
type Template struct {
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
	var t Template
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
	return p.kind == partText && (strings.HasPrefix(p.text, "https://") || strings.HasPrefix(p.text, "http://") ||
		strings.HasPrefix(p.text, "/") && !strings.HasPrefix(p.text, "//"))
}
