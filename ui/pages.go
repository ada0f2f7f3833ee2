package ui

import (
	"fmt"
	"regexp"
	"slices"
)

var slugPattern = regexp.MustCompile(`^[a-z][a-z0-9-]*$`)

// ValidatePages checks declared pages and returns a *PagesError listing
// every problem, or nil. Unknown views and source kinds pass. Validate
// before NormalizePages (an explicit limit of 0 is an error).
func ValidatePages(pages []Page) error {
	var ps []Problem
	if len(pages) > MaxPages {
		collector{&ps, ""}.add("ui_pages", "%d pages declared; at most %d", len(pages), MaxPages)
	}
	first := map[string]int{}
	for i, p := range pages {
		c := collector{&ps, fmt.Sprintf("pages[%d] (slug %q)", i, p.Slug)}
		switch {
		case !slugPattern.MatchString(p.Slug):
			c.add("slug", "%q must match ^[a-z][a-z0-9-]*$", p.Slug)
		case len(p.Slug) > MaxSlugLen:
			c.add("slug", "%d characters; at most %d", len(p.Slug), MaxSlugLen)
		}
		if j, dup := first[p.Slug]; dup {
			c.add("slug", "duplicate slug, also pages[%d]", j)
		} else {
			first[p.Slug] = i
		}
		if len(p.Widgets) > MaxWidgets {
			c.add("widgets", "%d widgets; at most %d per page", len(p.Widgets), MaxWidgets)
		}
		for j, w := range p.Widgets {
			checkWidget(c, fmt.Sprintf("widgets[%d]", j), w)
		}
	}
	return asError(ps, func(ps []Problem) *PagesError { return &PagesError{Problems: ps} })
}

// viewRules is the pairing table of the widget views this package knows.
type viewRules struct {
	columns, field, badge, format rule
}

type rule int

const (
	forbidden rule = iota
	optional
	required
)

var widgetViews = map[string]viewRules{
	ViewTable:    {columns: required},
	ViewKeyValue: {field: optional},
	ViewString:   {field: required},
	ViewBadge:    {field: required, badge: required},
	ViewStat:     {format: optional},
}

func checkWidget(c collector, key string, w Widget) {
	if w.View == "" {
		c.add(key+".view", "is required (table, keyvalue, string, badge or stat)")
	}
	r, viewKnown := widgetViews[w.View]
	if viewKnown {
		checkPairing(c, key, w, r)
	}
	if len(w.Columns) > 0 {
		checkColumns(c, key+".columns", w.Columns, nil)
	}
	checkBadgeColors(c, key+".badge_colors", w.BadgeColors)
	checkFormat(c, key+".format", w.Format)
	checkSource(c, key+".source", w.Source)
	_, kindKnown := sourceFields[w.Source.Kind]
	if viewKnown && kindKnown && (w.View == ViewStat) != (w.Source.Kind == SourceMetrics) {
		if w.View == ViewStat {
			c.add(key+".source.kind", "view 'stat' needs a metrics source, not %q", w.Source.Kind)
		} else {
			c.add(key+".source.kind", "a metrics source is only valid with view 'stat', not %q", w.View)
		}
	}
}

func checkPairing(c collector, key string, w Widget, r viewRules) {
	present := func(field string, has bool, rl rule, what string) {
		switch {
		case has && rl == forbidden:
			c.add(key+"."+field, "not valid with view '%s'%s", w.View, what)
		case !has && rl == required:
			c.add(key+"."+field, "required with view '%s'", w.View)
		}
	}
	if len(w.Columns) == 0 && r.columns == required {
		c.add(key+".columns", "required and must not be empty with view '%s'", w.View)
	} else {
		present("columns", len(w.Columns) > 0, r.columns, "")
	}
	present("field", w.Field != "", r.field, "")
	present("badge_colors", w.BadgeColors != nil, r.badge, "")
	tableHint := ""
	if w.View == ViewTable {
		tableHint = " (set format per column)"
	}
	present("format", w.Format != "", r.format, "; format is only valid with view 'stat'"+tableHint)
}

// sourceFields lists the fields each known source kind uses beyond kind.
var sourceFields = map[string][]string{
	SourceEvents:      {"event_types", "limit"},
	SourceAnnotations: {"kind_prefix", "limit"},
	SourceTasks:       {"limit"},
	SourceMetrics:     {"metric"},
}

func checkSource(c collector, key string, s Source) {
	if s.Kind == "" {
		c.add(key+".kind", "is required (events, annotations, tasks or metrics)")
		return
	}
	if s.Limit != nil && (*s.Limit < MinSourceLimit || *s.Limit > MaxSourceLimit) {
		c.add(key+".limit", "%d is outside %d-%d", *s.Limit, MinSourceLimit, MaxSourceLimit)
	}
	allowed, known := sourceFields[s.Kind]
	if !known {
		return
	}
	set := map[string]bool{
		"event_types": s.EventTypes != nil, "kind_prefix": s.KindPrefix != "",
		"limit": s.Limit != nil, "metric": s.Metric != "",
	}
	for _, f := range []string{"event_types", "kind_prefix", "limit", "metric"} {
		if set[f] && !slices.Contains(allowed, f) {
			c.add(key+"."+f, "not used by a %s source", s.Kind)
		}
	}
	switch s.Kind {
	case SourceEvents:
		if len(s.EventTypes) == 0 {
			c.add(key+".event_types", "required and must not be empty for an events source")
		}
		for i, t := range s.EventTypes {
			if t == "" {
				c.add(fmt.Sprintf("%s.event_types[%d]", key, i), "is empty")
			}
		}
	case SourceMetrics:
		if s.Metric == "" {
			c.add(key+".metric", "required for a metrics source")
		}
	}
}

// NormalizePages returns a copy of pages with defaults applied: a row
// source's limit and a title (the slug).
func NormalizePages(pages []Page) []Page {
	out := make([]Page, len(pages))
	for i, p := range pages {
		p.Widgets = slices.Clone(p.Widgets)
		if p.Title == "" {
			p.Title = p.Slug
		}
		for j := range p.Widgets {
			s := &p.Widgets[j].Source
			if s.Limit == nil && slices.Contains(sourceFields[s.Kind], "limit") {
				s.Limit = Limit(DefaultSourceLimit)
			}
		}
		out[i] = p
	}
	return out
}
