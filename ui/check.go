package ui

import (
	"fmt"
	"regexp"
)

// maxColumns bounds the columns of one table.
const maxColumns = 100

var rendererPattern = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)

// rowModel is the set of a table's row fields; nil means rows are dynamic
// (declared pages) and {row.*} references are not checked.
type rowModel map[string]bool

func newRowModel(fields []string) rowModel {
	m := rowModel{}
	for _, f := range fields {
		m[f] = true
	}
	return m
}

// templateUse says where a template sits.
type templateUse struct {
	link  bool     // a URL: must start safely, values percent-encoded
	rowOK bool     // {row.*} allowed here
	rows  rowModel // fields {row.*} may name; nil = not checked
}

func checkTemplate(c collector, field, s string, use templateUse) {
	if s == "" {
		return
	}
	t, err := ParseTemplate(s)
	if err != nil {
		c.add(field, "%v in %q", err, s)
		return
	}
	if use.link && !t.linkStart() {
		c.add(field, "%v: a link must start with a {base} token, http://, https:// or /: %q", ErrTemplate, s)
	}
	for _, f := range t.RowFields() {
		switch {
		case !use.rowOK:
			c.add(field, "{row.%s}: row references are only valid in table, tables and tree columns and detail elements", f)
		case use.rows != nil && !use.rows[f]:
			c.add(field, "{row.%s} names a field that is not on the row model", f)
		}
	}
}

func checkBadgeColors(c collector, field string, m map[string]string) {
	if m == nil {
		return
	}
	if len(m) == 0 {
		c.add(field, "must not be empty")
		return
	}
	for _, k := range sortedKeys(m) {
		if !badgeColors[m[k]] {
			c.add(field, "%q: unknown badge color %q (want green, red, yellow, blue, gray or purple)", k, m[k])
		}
	}
}

func checkFormat(c collector, field, f string) {
	if f != "" && !formats[f] {
		c.add(field, "%q is not one of duration_ms, bytes, timestamp, number", f)
	}
}

func checkRendererName(c collector, field, r string) {
	if r != "" && !rendererPattern.MatchString(r) {
		c.add(field, "invalid renderer name %q: want ^[a-zA-Z_][a-zA-Z0-9_]*$", r)
	}
}

// checkColumns checks a table's column selection: names set, unique, on
// the row model when there is one, and each column's own rules.
func checkColumns(c collector, field string, cs Columns, rows rowModel) {
	if len(cs) > maxColumns {
		c.add(field, "%d columns; at most %d", len(cs), maxColumns)
	}
	seen := map[string]bool{}
	for i, col := range cs {
		key := fmt.Sprintf("%s.%s", field, col.Name)
		switch {
		case col.Name == "":
			key = fmt.Sprintf("%s[%d]", field, i)
			c.add(key, "column name is empty")
		case seen[col.Name]:
			c.add(key, "duplicate column name %q", col.Name)
		case rows != nil && !rows[col.Name]:
			c.add(key, "column %q names a field that is not on the row model", col.Name)
		}
		seen[col.Name] = true
		checkColumn(c, key, col, rows)
	}
}

func checkColumn(c collector, key string, col Column, rows rowModel) {
	checkBadgeColors(c, key+".badge_colors", col.BadgeColors)
	checkFormat(c, key+".format", col.Format)
	checkTemplate(c, key+".link_template", col.LinkTemplate, templateUse{link: true, rowOK: true, rows: rows})
	checkTemplate(c, key+".hint", col.Hint, templateUse{rowOK: true, rows: rows})
	checkRendererName(c, key+".renderer", col.Renderer)
	if col.Renderer != "" && (col.LinkTemplate != "" || col.BadgeColors != nil || col.Format != "") {
		c.add(key+".renderer", "renderer cannot be combined with link_template, badge_colors or format")
	}
}

// asError wraps problems in the declaration's error type, or returns nil.
func asError[E error](ps []Problem, wrap func([]Problem) E) error {
	if len(ps) == 0 {
		return nil
	}
	return wrap(ps)
}
