package ui

import (
	"errors"
	"fmt"
	"strings"
)

// Problem is one validation finding: Where locates the declaration (a page
// or a probe-details field), Field is the dotted key inside it
// ("columns.status.badge_colors").
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

// PagesError lists every problem of a ui_pages declaration.
type PagesError struct {
	Problems []Problem
}

// Error lists every problem, one per line.
func (e *PagesError) Error() string { return joinProblems("ui pages", e.Problems) }

// ProbeDetailsError lists every problem of a probe_details declaration.
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

// CheckDeclarations validates the exec handler's declared pages and probe
// details; each problem names its config key and the contract's error name,
// e.g. `handler.ui_pages[0] (slug "orders") widgets[1].columns: ... (UIPagesConfigError)`.
func CheckDeclarations(pages []Page, details ProbeDetails) []string {
	var out []string
	var pe *PagesError
	if errors.As(ValidatePages(pages), &pe) {
		for _, pr := range pe.Problems {
			out = append(out, configProblem("handler.ui_pages", "pages", "UIPagesConfigError", pr))
		}
	}
	var de *ProbeDetailsError
	if errors.As(ValidateProbeDetails(details), &de) {
		for _, pr := range de.Problems {
			out = append(out, configProblem("handler.probe_details.fields", "fields", "ProbeDetailsConfigError", pr))
		}
	}
	return out
}

// configProblem renders a Problem under its config key root.
func configProblem(root, list, kind string, pr Problem) string {
	where, field := pr.Where, pr.Field
	if rest, ok := strings.CutPrefix(where, list+"["); ok {
		where = root + "[" + rest
	}
	if where == "" {
		where, field = root, ""
	}
	if field != "" {
		where += " " + field
	}
	return fmt.Sprintf("%s: %s (%s)", where, pr.Message, kind)
}

// collector gathers problems at one location.
type collector struct {
	out   *[]Problem
	where string
}

func (c collector) add(field, format string, args ...any) {
	*c.out = append(*c.out, Problem{Where: c.where, Field: field, Message: fmt.Sprintf(format, args...)})
}
