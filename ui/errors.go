package ui

import (
	"fmt"
	"strings"
)

// Problem is one validation finding. Where locates the declaration (a page
// with its index and slug and a widget index, or a probe-details field);
// Field is the key inside it, dotted (e.g. "source.limit",
// "columns.status.badge_colors").
type Problem struct {
	Where   string
	Field   string
	Message string
}

// String renders the problem as "<where> <field>: <message>".
func (p Problem) String() string {
	switch {
	case p.Where == "":
		return p.Field + ": " + p.Message
	case p.Field == "":
		return p.Where + ": " + p.Message
	}
	return p.Where + " " + p.Field + ": " + p.Message
}

// PagesError lists every problem of a ui_pages declaration. The
// worker refuses to start with it.
type PagesError struct {
	Problems []Problem
}

// Error lists every problem, one per line.
func (e *PagesError) Error() string { return joinProblems("ui pages", e.Problems) }

// ProbeDetailsError lists every problem of a probe_details
// declaration. The worker refuses to start with it.
type ProbeDetailsError struct {
	Problems []Problem
}

// Error lists every problem, one per line.
func (e *ProbeDetailsError) Error() string { return joinProblems("probe details", e.Problems) }

func joinProblems(what string, ps []Problem) string {
	var b strings.Builder
	fmt.Fprintf(&b, "invalid %s: %d problem(s)", what, len(ps))
	for _, p := range ps {
		b.WriteString("\n  - ")
		b.WriteString(p.String())
	}
	return b.String()
}

// collector gathers problems at one location.
type collector struct {
	out   *[]Problem
	where string
}

func (c collector) add(field, format string, args ...any) {
	*c.out = append(*c.out, Problem{Where: c.where, Field: field, Message: fmt.Sprintf(format, args...)})
}
