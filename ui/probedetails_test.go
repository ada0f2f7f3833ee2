package ui

import (
	"errors"
	"testing"
)

// itemsField is a valid table field the cases below start from.
func itemsField() ProbeField {
	return ProbeField{
		Name: "items", View: ViewTable, RowFields: []string{"sku", "qty", "status", "url"},
		Columns: Columns{{Name: "sku", LinkTemplate: "{shop}/sku/{value}?q={row.qty}"}, {Name: "status", BadgeColors: map[string]string{"ok": "green"}}},
		Detail: &Detail{Title: "Item {row.sku}", Elements: []Element{
			{View: ViewString, Field: "sku"},
			{View: ViewLinks, Links: []Link{{Label: "Open", Template: "{shop}/items/{row.sku}"}}},
			{View: ViewCustom, Field: "url", Renderer: "preview"},
		}},
	}
}

func details(fs ...ProbeField) ProbeDetails { return ProbeDetails{Fields: fs} }

func probeProblems(t *testing.T, err error) []Problem {
	t.Helper()
	if err == nil {
		return nil
	}
	var pe *ProbeDetailsError
	if !errors.As(err, &pe) {
		t.Fatalf("error %T %v, want *ProbeDetailsError", err, err)
	}
	return pe.Problems
}

func TestValidateProbeDetailsAcceptsEveryView(t *testing.T) {
	t.Parallel()
	d := details(
		ProbeField{Name: "summary", View: ViewString, Format: "bytes", Hint: "{value} bytes", LinkTemplate: "https://x.test/{value}"},
		ProbeField{Name: "meta", View: ViewKeyValue},
		itemsField(),
		ProbeField{Name: "by_store", View: ViewTables, RowFields: []string{"sku"}},
		ProbeField{Name: "plan", View: ViewTree, RowFields: []string{"step", "took_ms"}, Columns: Columns{{Name: "took_ms", Format: "duration_ms", Hint: "step {row.step}"}}},
		ProbeField{Name: "state", View: ViewBadge, BadgeColors: map[string]string{"ok": "green", "*": "gray"}, LinkTemplate: "{docs}/states#{value}"},
		ProbeField{Name: "chart", View: ViewCustom, Renderer: "sparkline", Hint: "{value}"},
	)
	if err := ValidateProbeDetails(d); err != nil {
		t.Fatalf("ValidateProbeDetails(every view) = %v, want nil", err)
	}
}

// One case per ProbeDetailsError condition.
func TestValidateProbeDetailsRejects(t *testing.T) {
	t.Parallel()
	with := func(f func(*ProbeField)) ProbeDetails {
		p := itemsField()
		f(&p)
		return details(p)
	}
	cases := []struct {
		name  string
		d     ProbeDetails
		field string
		msg   string
	}{
		{"badge_colors on a non-badge view", details(ProbeField{Name: "s", View: ViewString, BadgeColors: map[string]string{"a": "red"}}), "badge_colors", "only view 'badge'"},
		{"badge_colors on a table field", with(func(p *ProbeField) { p.BadgeColors = map[string]string{"a": "red"} }), "badge_colors", "only view 'badge'"},
		{"unknown badge color", details(ProbeField{Name: "s", View: ViewBadge, BadgeColors: map[string]string{"a": "teal"}}), "badge_colors", `unknown badge color "teal"`},
		{"unknown badge color on a column", with(func(p *ProbeField) { p.Columns[1].BadgeColors["ok"] = "lime" }), "columns.status.badge_colors", "unknown badge color"},
		{"malformed template", details(ProbeField{Name: "s", View: ViewString, LinkTemplate: "https://x/{value"}), "link_template", "malformed template"},
		{"malformed hint", details(ProbeField{Name: "s", View: ViewString, Hint: "a}b"}), "hint", "malformed template"},
		{"unknown token shape", details(ProbeField{Name: "s", View: ViewString, LinkTemplate: "https://x/{row-sku}"}), "link_template", "unknown token shape {row-sku}"},
		{"empty token", details(ProbeField{Name: "s", View: ViewString, Hint: "a {} b"}), "hint", "unknown token shape {}"},
		{"row token on a scalar field", details(ProbeField{Name: "s", View: ViewString, Hint: "{row.sku}"}), "hint", "only valid in table, tables and tree columns"},
		{"row reference to a nonexistent field in a column", with(func(p *ProbeField) { p.Columns[0].LinkTemplate = "{shop}/{row.colour}" }), "columns.sku.link_template", "{row.colour} names a field that is not on the row model"},
		{"row reference to a nonexistent field in a detail title", with(func(p *ProbeField) { p.Detail.Title = "Item {row.name}" }), "detail.title", "{row.name} names a field"},
		{"row reference to a nonexistent field in a link", with(func(p *ProbeField) { p.Detail.Elements[1].Links[0].Template = "/x/{row.id}" }), "detail.elements[1].links[0].template", "{row.id} names a field"},
		{"column naming a field not on the row model", with(func(p *ProbeField) { p.Columns = append(p.Columns, Column{Name: "price"}) }), "columns.price", "not on the row model"},
		{"duplicate column name", with(func(p *ProbeField) { p.Columns = append(p.Columns, Column{Name: "sku"}) }), "columns.sku", "duplicate column name"},
		{"detail element field not on the row model", with(func(p *ProbeField) { p.Detail.Elements[0].Field = "price" }), "detail.elements[0].field", `"price" is not a field of the row model`},
		{"link_template and detail both set", with(func(p *ProbeField) { p.LinkTemplate = "{shop}/x" }), "link_template", "mutually exclusive"},
		{"empty badge_colors on a column", with(func(p *ProbeField) { p.Columns[1].BadgeColors = map[string]string{} }), "columns.status.badge_colors", "must not be empty"},
		{"empty elements on a detail", with(func(p *ProbeField) { p.Detail.Elements = nil }), "detail.elements", "must not be empty"},
		{"renderer outside view custom", details(ProbeField{Name: "s", View: ViewString, Renderer: "x"}), "renderer", "only view 'custom' takes one"},
		{"renderer on a string element", with(func(p *ProbeField) { p.Detail.Elements[0].Renderer = "x" }), "detail.elements[0].renderer", "only view 'custom'"},
		{"custom without renderer", details(ProbeField{Name: "s", View: ViewCustom}), "renderer", "requires a renderer"},
		{"custom element without renderer", with(func(p *ProbeField) { p.Detail.Elements[2].Renderer = "" }), "detail.elements[2].renderer", "requires a renderer"},
		{"invalid renderer name", details(ProbeField{Name: "s", View: ViewCustom, Renderer: "9lives"}), "renderer", "invalid renderer name"},
		{"invalid renderer name on a column", with(func(p *ProbeField) { p.Columns = append(p.Columns, Column{Name: "url", Renderer: "a.b"}) }), "columns.url.renderer", "invalid renderer name"},
		{"renderer with link_template", details(ProbeField{Name: "s", View: ViewCustom, Renderer: "r", LinkTemplate: "/x"}), "renderer", "cannot be combined"},
		{"renderer with badge_colors", details(ProbeField{Name: "s", View: ViewCustom, Renderer: "r", BadgeColors: map[string]string{"a": "red"}}), "renderer", "cannot be combined"},
		{"renderer with format", details(ProbeField{Name: "s", View: ViewCustom, Renderer: "r", Format: "bytes"}), "renderer", "cannot be combined"},
		{"column renderer with format", with(func(p *ProbeField) {
			p.Columns = append(p.Columns, Column{Name: "qty", Renderer: "r", Format: "number"})
		}), "columns.qty.renderer", "cannot be combined"},
		// Structural rules the tables imply.
		{"table without row model", details(ProbeField{Name: "t", View: ViewTable}), "row_fields", "required"},
		{"row model on a string", details(ProbeField{Name: "s", View: ViewString, RowFields: []string{"a"}}), "row_fields", "only valid with view table"},
		{"columns on keyvalue", details(ProbeField{Name: "s", View: ViewKeyValue, Columns: Columns{{Name: "a"}}}), "columns", "only valid with view table"},
		{"detail on badge", details(ProbeField{Name: "s", View: ViewBadge, Detail: &Detail{Elements: []Element{{View: ViewString, Field: "a"}}}}), "detail", "only valid with view table"},
		{"hint on a table field", with(func(p *ProbeField) { p.Hint = "x" }), "hint", "set hint on a column"},
		{"format on a table field", with(func(p *ProbeField) { p.Format = "number" }), "format", "only valid with view 'string'"},
		{"unknown format", details(ProbeField{Name: "s", View: ViewString, Format: "percent"}), "format", "not one of"},
		{"links element without links", with(func(p *ProbeField) { p.Detail.Elements[1].Links = nil }), "detail.elements[1].links", "required with view 'links'"},
		{"links on a string element", with(func(p *ProbeField) { p.Detail.Elements[0].Links = []Link{{Template: "/x"}} }), "detail.elements[0].links", "only valid with view 'links'"},
		{"string element without field", with(func(p *ProbeField) { p.Detail.Elements[0].Field = "" }), "detail.elements[0].field", "required"},
		{"duplicate field name", details(ProbeField{Name: "s", View: ViewString}, ProbeField{Name: "s", View: ViewKeyValue}), "name", "duplicate field name"},
		{"missing view", details(ProbeField{Name: "s"}), "view", "is required"},
		{"duplicate row field", details(ProbeField{Name: "t", View: ViewTable, RowFields: []string{"a", "a"}}), "row_fields[1]", "duplicate row field"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ps := probeProblems(t, ValidateProbeDetails(tc.d))
			if !hasProblem(ps, tc.field, tc.msg) {
				t.Errorf("ValidateProbeDetails problems = %v, want one at %q containing %q", ps, tc.field, tc.msg)
			}
		})
	}
}

func TestValidateProbeDetailsAcceptsUnknownView(t *testing.T) {
	t.Parallel()
	d := details(
		ProbeField{Name: "flame", View: "flamegraph", RowFields: []string{"frame"}, Columns: Columns{{Name: "frame"}}, Hint: "{value}"},
		ProbeField{Name: "map", View: "geo", Renderer: "worldmap", LinkTemplate: "{maps}/{value}"},
		func() ProbeField {
			f := itemsField()
			f.Detail.Elements = append(f.Detail.Elements, Element{View: "chart", Field: "qty"})
			return f
		}(),
	)
	if err := ValidateProbeDetails(d); err != nil {
		t.Fatalf("ValidateProbeDetails(unknown views) = %v, want nil", err)
	}
}

func TestProbeDetailsErrorLocatesEveryProblem(t *testing.T) {
	t.Parallel()
	d := details(ProbeField{Name: "ok", View: ViewString}, ProbeField{Name: "items", View: ViewTable, RowFields: []string{"a"}, Columns: Columns{{Name: "b"}}, Renderer: "x"})
	err := ValidateProbeDetails(d)
	ps := probeProblems(t, err)
	if len(ps) != 2 {
		t.Fatalf("problems = %v, want 2", ps)
	}
	for _, p := range ps {
		if p.Where != "fields[1] (items)" {
			t.Errorf("problem %v located at %q, want fields[1] (items)", p, p.Where)
		}
	}
}
