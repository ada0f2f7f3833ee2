package ui

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// tableWidget is a valid table widget the cases below start from.
func tableWidget() Widget {
	return Widget{
		Title: "Recent orders", View: ViewTable,
		Source:  Source{Kind: SourceAnnotations, KindPrefix: "order."},
		Columns: Columns{{Name: "order_id", LinkTemplate: "{shop}/orders/{value}"}, {Name: "status", BadgeColors: map[string]string{"paid": "green", "*": "gray"}}},
	}
}

func statWidget() Widget {
	return Widget{Title: "Orders", View: ViewStat, Source: Source{Kind: SourceMetrics, Metric: "svc_tasks_total"}, Format: "number"}
}

func onePage(ws ...Widget) []Page {
	return []Page{{Slug: "orders", Title: "Orders", Widgets: ws}}
}

// problemsOf returns the problems of a *PagesError, failing the
// test for any other error.
func pageProblems(t *testing.T, err error) []Problem {
	t.Helper()
	if err == nil {
		return nil
	}
	var pe *PagesError
	if !errors.As(err, &pe) {
		t.Fatalf("error %T %v, want *PagesError", err, err)
	}
	return pe.Problems
}

// hasProblem reports a problem whose field ends with field and whose
// message contains msg.
func hasProblem(ps []Problem, field, msg string) bool {
	for _, p := range ps {
		if strings.HasSuffix(p.Field, field) && strings.Contains(p.Message, msg) {
			return true
		}
	}
	return false
}

func TestValidatePagesAcceptsEveryView(t *testing.T) {
	t.Parallel()
	pages := onePage(
		tableWidget(),
		Widget{View: ViewKeyValue, Source: Source{Kind: SourceTasks, Limit: Limit(5)}, Field: "labels"},
		Widget{View: ViewKeyValue, Source: Source{Kind: SourceTasks}},
		Widget{View: ViewString, Source: Source{Kind: SourceEvents, EventTypes: []string{"annotation"}}, Field: "kind"},
		Widget{View: ViewBadge, Source: Source{Kind: SourceTasks}, Field: "status", BadgeColors: map[string]string{"ok": "green", "failed": "red"}},
		statWidget(),
	)
	if err := ValidatePages(pages); err != nil {
		t.Fatalf("ValidatePages(every view) = %v, want nil", err)
	}
	if err := ValidatePages(nil); err != nil {
		t.Fatalf("ValidatePages(nil) = %v, want nil", err)
	}
}

// One case per PagesError condition, plus the source rules.
func TestValidatePagesRejects(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		pages []Page
		field string
		msg   string
	}{
		{"slug invalid", []Page{{Slug: "Orders", Widgets: []Widget{tableWidget()}}}, "slug", "must match"},
		{"slug starts with digit", []Page{{Slug: "1orders"}}, "slug", "must match"},
		{"slug empty", []Page{{Slug: ""}}, "slug", "must match"},
		{"slug duplicate", []Page{{Slug: "a"}, {Slug: "b"}, {Slug: "a"}}, "slug", "duplicate slug, also pages[0]"},
		{"table without columns", onePage(Widget{View: ViewTable, Source: Source{Kind: SourceTasks}}), "widgets[0].columns", "required"},
		{"table with empty columns", onePage(Widget{View: ViewTable, Source: Source{Kind: SourceTasks}, Columns: Columns{}}), "widgets[0].columns", "must not be empty"},
		{"columns on keyvalue", onePage(Widget{View: ViewKeyValue, Source: Source{Kind: SourceTasks}, Columns: Columns{{Name: "a"}}}), "widgets[0].columns", "not valid with view 'keyvalue'"},
		{"columns on string", onePage(Widget{View: ViewString, Source: Source{Kind: SourceTasks}, Field: "a", Columns: Columns{{Name: "a"}}}), "widgets[0].columns", "not valid"},
		{"field on table", onePage(func() Widget { w := tableWidget(); w.Field = "x"; return w }()), "widgets[0].field", "not valid with view 'table'"},
		{"field on stat", onePage(func() Widget { w := statWidget(); w.Field = "x"; return w }()), "widgets[0].field", "not valid with view 'stat'"},
		{"string without field", onePage(Widget{View: ViewString, Source: Source{Kind: SourceTasks}}), "widgets[0].field", "required with view 'string'"},
		{"badge without field", onePage(Widget{View: ViewBadge, Source: Source{Kind: SourceTasks}, BadgeColors: map[string]string{"a": "red"}}), "widgets[0].field", "required"},
		{"badge without badge_colors", onePage(Widget{View: ViewBadge, Source: Source{Kind: SourceTasks}, Field: "status"}), "widgets[0].badge_colors", "required with view 'badge'"},
		{"badge_colors on string", onePage(Widget{View: ViewString, Source: Source{Kind: SourceTasks}, Field: "s", BadgeColors: map[string]string{"a": "red"}}), "widgets[0].badge_colors", "not valid"},
		{"format on table", onePage(func() Widget { w := tableWidget(); w.Format = "number"; return w }()), "widgets[0].format", "only valid with view 'stat'"},
		{"format on string", onePage(Widget{View: ViewString, Source: Source{Kind: SourceTasks}, Field: "s", Format: "bytes"}), "widgets[0].format", "only valid with view 'stat'"},
		{"format unknown on stat", onePage(func() Widget { w := statWidget(); w.Format = "percent"; return w }()), "widgets[0].format", "not one of"},
		{"stat without metrics source", onePage(Widget{View: ViewStat, Source: Source{Kind: SourceTasks}}), "widgets[0].source.kind", "view 'stat' needs a metrics source"},
		{"metrics source without stat", onePage(Widget{View: ViewString, Field: "x", Source: Source{Kind: SourceMetrics, Metric: "m"}}), "widgets[0].source.kind", "only valid with view 'stat'"},
		{"malformed link_template", onePage(func() Widget { w := tableWidget(); w.Columns[0].LinkTemplate = "{shop/orders"; return w }()), "columns.order_id.link_template", "malformed template"},
		{"link_template unknown token shape", onePage(func() Widget { w := tableWidget(); w.Columns[0].LinkTemplate = "{Shop}/x"; return w }()), "columns.order_id.link_template", "unknown token shape {Shop}"},
		{"link_template javascript", onePage(func() Widget { w := tableWidget(); w.Columns[0].LinkTemplate = "javascript:alert({value})"; return w }()), "columns.order_id.link_template", "must start with"},
		{"malformed hint", onePage(func() Widget { w := tableWidget(); w.Columns[1].Hint = "order } {value}"; return w }()), "columns.status.hint", "malformed template"},
		{"unknown badge color in column", onePage(func() Widget { w := tableWidget(); w.Columns[1].BadgeColors["paid"] = "pink"; return w }()), "columns.status.badge_colors", `unknown badge color "pink"`},
		{"unknown badge color on badge", onePage(Widget{View: ViewBadge, Source: Source{Kind: SourceTasks}, Field: "s", BadgeColors: map[string]string{"ok": "orange"}}), "widgets[0].badge_colors", "unknown badge color"},
		{"empty badge_colors on column", onePage(func() Widget { w := tableWidget(); w.Columns[1].BadgeColors = map[string]string{}; return w }()), "columns.status.badge_colors", "must not be empty"},
		{"empty badge_colors on badge", onePage(Widget{View: ViewBadge, Source: Source{Kind: SourceTasks}, Field: "s", BadgeColors: map[string]string{}}), "widgets[0].badge_colors", "must not be empty"},
		{"duplicate column", onePage(func() Widget { w := tableWidget(); w.Columns = append(w.Columns, Column{Name: "status"}); return w }()), "columns.status", "duplicate column name"},
		{"column renderer with link_template", onePage(func() Widget { w := tableWidget(); w.Columns[0].Renderer = "orderLink"; return w }()), "columns.order_id.renderer", "cannot be combined"},
		{"column renderer name", onePage(func() Widget {
			w := tableWidget()
			w.Columns = append(w.Columns, Column{Name: "x", Renderer: "my-renderer"})
			return w
		}()), "columns.x.renderer", "invalid renderer name"},
		{"view missing", onePage(Widget{Source: Source{Kind: SourceTasks}}), "widgets[0].view", "is required"},
		{"source kind missing", onePage(Widget{View: ViewKeyValue}), "widgets[0].source.kind", "is required"},
		{"events without event_types", onePage(Widget{View: ViewKeyValue, Source: Source{Kind: SourceEvents}}), "widgets[0].source.event_types", "required"},
		{"metrics without metric", onePage(Widget{View: ViewStat, Source: Source{Kind: SourceMetrics}}), "widgets[0].source.metric", "required"},
		{"limit on metrics", onePage(Widget{View: ViewStat, Source: Source{Kind: SourceMetrics, Metric: "m", Limit: Limit(5)}}), "widgets[0].source.limit", "not used by a metrics source"},
		{"metric on tasks", onePage(Widget{View: ViewKeyValue, Source: Source{Kind: SourceTasks, Metric: "m"}}), "widgets[0].source.metric", "not used by a tasks source"},
		{"event_types on annotations", onePage(Widget{View: ViewKeyValue, Source: Source{Kind: SourceAnnotations, EventTypes: []string{"x"}}}), "widgets[0].source.event_types", "not used"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ps := pageProblems(t, ValidatePages(tc.pages))
			if !hasProblem(ps, tc.field, tc.msg) {
				t.Errorf("ValidatePages problems = %v, want one at %q containing %q", ps, tc.field, tc.msg)
			}
		})
	}
}

func TestValidatePagesLimits(t *testing.T) {
	t.Parallel()
	pagesN := func(n int) []Page {
		out := make([]Page, n)
		for i := range out {
			out[i] = Page{Slug: fmt.Sprintf("p%d", i), Widgets: []Widget{statWidget()}}
		}
		return out
	}
	widgetsN := func(n int) []Page {
		ws := make([]Widget, n)
		for i := range ws {
			ws[i] = statWidget()
		}
		return onePage(ws...)
	}
	limit := func(n int) []Page {
		return onePage(Widget{View: ViewKeyValue, Source: Source{Kind: SourceTasks, Limit: Limit(n)}})
	}
	slug := func(n int) []Page { return []Page{{Slug: "a" + strings.Repeat("b", n-1)}} }
	cases := []struct {
		name  string
		pages []Page
		field string // "" means valid
		msg   string
	}{
		{"slug 40", slug(40), "", ""},
		{"slug 41", slug(41), "slug", "41 characters; at most 40"},
		{"pages 20", pagesN(20), "", ""},
		{"pages 21", pagesN(21), "ui_pages", "21 pages declared; at most 20"},
		{"widgets 12", widgetsN(12), "", ""},
		{"widgets 13", widgetsN(13), "widgets", "13 widgets; at most 12"},
		{"limit 0", limit(0), "source.limit", "0 is outside 1-1000"},
		{"limit 1", limit(1), "", ""},
		{"limit 1000", limit(1000), "", ""},
		{"limit 1001", limit(1001), "source.limit", "1001 is outside 1-1000"},
		{"limit negative", limit(-1), "source.limit", "outside"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ps := pageProblems(t, ValidatePages(tc.pages))
			if tc.field == "" {
				if ps != nil {
					t.Fatalf("ValidatePages = %v, want nil", ps)
				}
				return
			}
			if !hasProblem(ps, tc.field, tc.msg) {
				t.Errorf("ValidatePages problems = %v, want one at %q containing %q", ps, tc.field, tc.msg)
			}
		})
	}
}

// The UI shows a placeholder for a view or source kind it does not know,
// so a declaration using a newer one still loads.
func TestValidatePagesAcceptsUnknownViewAndKind(t *testing.T) {
	t.Parallel()
	pages := onePage(
		Widget{View: "heatmap", Source: Source{Kind: SourceTasks}, Field: "x", Format: "number", Columns: Columns{{Name: "a"}}},
		Widget{View: ViewTable, Source: Source{Kind: "traces", Metric: "m"}, Columns: Columns{{Name: "a"}}},
		Widget{View: ViewStat, Source: Source{Kind: "prometheus"}},
		Widget{View: "gauge", Source: Source{Kind: SourceMetrics, Metric: "m"}},
	)
	if err := ValidatePages(pages); err != nil {
		t.Fatalf("ValidatePages(unknown view and kinds) = %v, want nil", err)
	}
	// Checks that do not depend on the view still apply.
	pages = onePage(Widget{View: "heatmap", Source: Source{Kind: "traces", Limit: Limit(5000)}, BadgeColors: map[string]string{"a": "pink"}})
	ps := pageProblems(t, ValidatePages(pages))
	if !hasProblem(ps, "source.limit", "outside") || !hasProblem(ps, "badge_colors", "unknown badge color") {
		t.Errorf("ValidatePages problems = %v, want the limit and the color", ps)
	}
}

// Every problem is reported at once, each with its page and widget.
func TestValidatePagesListsEveryProblem(t *testing.T) {
	t.Parallel()
	pages := []Page{
		{Slug: "ok", Widgets: []Widget{statWidget()}},
		{Slug: "Bad", Widgets: []Widget{{View: ViewTable, Source: Source{Kind: SourceTasks, Limit: Limit(0)}}, {View: ViewBadge, Source: Source{Kind: SourceTasks}}}},
	}
	ps := pageProblems(t, ValidatePages(pages))
	if len(ps) != 5 {
		t.Fatalf("got %d problems %v, want 5 (slug, columns, limit, field, badge_colors)", len(ps), ps)
	}
	err := ValidatePages(pages).Error()
	for _, want := range []string{
		`pages[1] (slug "Bad") slug:`,
		`pages[1] (slug "Bad") widgets[0].columns:`,
		`pages[1] (slug "Bad") widgets[0].source.limit: 0 is outside 1-1000`,
		`pages[1] (slug "Bad") widgets[1].field: required with view 'badge'`,
		`pages[1] (slug "Bad") widgets[1].badge_colors: required with view 'badge'`,
	} {
		if !strings.Contains(err, want) {
			t.Errorf("error text misses %q:\n%s", want, err)
		}
	}
}

func TestNormalizePages(t *testing.T) {
	t.Parallel()
	in := onePage(
		Widget{View: ViewKeyValue, Source: Source{Kind: SourceTasks}},
		Widget{View: ViewKeyValue, Source: Source{Kind: SourceEvents, EventTypes: []string{"x"}, Limit: Limit(7)}},
		statWidget(),
		Widget{View: ViewKeyValue, Source: Source{Kind: "future"}},
	)
	in[0].Title = ""
	out := NormalizePages(in)
	if got := *out[0].Widgets[0].Source.Limit; got != DefaultSourceLimit {
		t.Errorf("omitted limit = %d, want %d", got, DefaultSourceLimit)
	}
	if got := *out[0].Widgets[1].Source.Limit; got != 7 {
		t.Errorf("explicit limit = %d, want 7", got)
	}
	if out[0].Widgets[2].Source.Limit != nil || out[0].Widgets[3].Source.Limit != nil {
		t.Errorf("metrics and unknown sources got a limit; want none")
	}
	if out[0].Title != "orders" {
		t.Errorf("empty title = %q, want the slug", out[0].Title)
	}
	if in[0].Widgets[0].Source.Limit != nil {
		t.Errorf("NormalizePages changed its input")
	}
	if err := ValidatePages(out); err != nil {
		t.Errorf("normalized pages do not validate: %v", err)
	}
}
