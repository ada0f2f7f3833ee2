package ui

import "fmt"

// maxProbeFields bounds the top-level fields of a probe-details declaration.
const maxProbeFields = 100

// rowViews are the views whose value is rows following RowFields.
var rowViews = map[string]bool{ViewTable: true, ViewTables: true, ViewTree: true}

// probeViews are the top-level views this package knows.
var probeViews = map[string]bool{
	ViewString: true, ViewKeyValue: true, ViewTable: true, ViewTables: true,
	ViewTree: true, ViewBadge: true, ViewCustom: true,
}

// elementViews are the detail-element views this package knows.
var elementViews = map[string]bool{ViewString: true, ViewKeyValue: true, ViewTable: true, ViewLinks: true, ViewCustom: true}

// ValidateProbeDetails checks a probe-details declaration and returns a
// *ProbeDetailsError listing every problem, or nil. An unknown view gets
// the checks that do not depend on the view.
func ValidateProbeDetails(d ProbeDetails) error {
	var ps []Problem
	if len(d.Fields) > maxProbeFields {
		collector{&ps, ""}.add("fields", "%d fields; at most %d", len(d.Fields), maxProbeFields)
	}
	first := map[string]int{}
	for i, f := range d.Fields {
		c := collector{&ps, fmt.Sprintf("fields[%d] (%s)", i, f.Name)}
		if f.Name == "" {
			c.add("name", "is required")
		} else if j, dup := first[f.Name]; dup {
			c.add("name", "duplicate field name, also fields[%d]", j)
		} else {
			first[f.Name] = i
		}
		checkProbeField(c, f)
	}
	return asError(ps, func(ps []Problem) *ProbeDetailsError { return &ProbeDetailsError{Problems: ps} })
}

func checkProbeField(c collector, f ProbeField) {
	known := probeViews[f.View]
	hasRows := rowViews[f.View]
	if f.View == "" {
		c.add("view", "is required (string, keyvalue, table, tables, tree, badge or custom)")
	}
	var rows rowModel
	switch {
	case hasRows:
		rows = checkRowFields(c, f.RowFields)
	case known && f.RowFields != nil:
		c.add("row_fields", "only valid with view table, tables or tree")
	case !known && f.RowFields != nil:
		rows = checkRowFields(c, f.RowFields)
	}

	if known && !hasRows {
		if len(f.Columns) > 0 {
			c.add("columns", "only valid with view table, tables or tree")
		}
		if f.Detail != nil {
			c.add("detail", "only valid with view table, tables or tree")
		}
	}
	if len(f.Columns) > 0 {
		checkColumns(c, "columns", f.Columns, rows)
	}

	if known && f.View != ViewBadge && f.BadgeColors != nil {
		c.add("badge_colors", "badge_colors on view '%s': only view 'badge' takes them", f.View)
	}
	checkBadgeColors(c, "badge_colors", f.BadgeColors)
	checkFormat(c, "format", f.Format)
	if known && f.Format != "" && f.View != ViewString && f.View != ViewCustom {
		c.add("format", "only valid with view 'string' (tables set format per column)")
	}
	if known && f.Hint != "" && hasRows {
		c.add("hint", "not valid on a %s field; set hint on a column", f.View)
	}
	checkTemplate(c, "hint", f.Hint, templateUse{})
	checkTemplate(c, "link_template", f.LinkTemplate, templateUse{link: true, rowOK: hasRows || !known, rows: rows})
	if f.LinkTemplate != "" && f.Detail != nil {
		c.add("link_template", "link_template and detail are mutually exclusive")
	}

	checkRenderer(c, "renderer", f.View, f.Renderer, known)
	if f.View == ViewCustom && f.Renderer != "" && (f.LinkTemplate != "" || f.BadgeColors != nil || f.Format != "") {
		c.add("renderer", "renderer cannot be combined with link_template, badge_colors or format")
	}
	if f.Detail != nil {
		checkDetail(c, *f.Detail, rows)
	}
}

func checkRowFields(c collector, fields []string) rowModel {
	if len(fields) == 0 {
		c.add("row_fields", "required and must not be empty: the row model of the table's rows")
	}
	if len(fields) > maxColumns {
		c.add("row_fields", "%d fields; at most %d", len(fields), maxColumns)
	}
	seen := map[string]bool{}
	for i, f := range fields {
		switch {
		case !rowFieldPattern.MatchString(f):
			c.add(fmt.Sprintf("row_fields[%d]", i), "%q must be letters, digits, '_' or '-', starting with a letter or '_'", f)
		case seen[f]:
			c.add(fmt.Sprintf("row_fields[%d]", i), "duplicate row field %q", f)
		}
		seen[f] = true
	}
	return newRowModel(fields)
}

func checkDetail(c collector, d Detail, rows rowModel) {
	checkTemplate(c, "detail.title", d.Title, templateUse{rowOK: true, rows: rows})
	if len(d.Elements) == 0 {
		c.add("detail.elements", "must not be empty")
	}
	if len(d.Elements) > maxColumns {
		c.add("detail.elements", "%d elements; at most %d", len(d.Elements), maxColumns)
	}
	for i, e := range d.Elements {
		key := fmt.Sprintf("detail.elements[%d]", i)
		known := elementViews[e.View]
		if e.View == "" {
			c.add(key+".view", "is required (string, keyvalue, table, links or custom)")
		}
		switch {
		case e.Field == "" && known && e.View != ViewLinks:
			c.add(key+".field", "required with view '%s'", e.View)
		case e.Field != "" && rows != nil && !rows[e.Field]:
			c.add(key+".field", "%q is not a field of the row model", e.Field)
		}
		switch {
		case e.View == ViewLinks && len(e.Links) == 0:
			c.add(key+".links", "required with view 'links'")
		case known && e.View != ViewLinks && e.Links != nil:
			c.add(key+".links", "only valid with view 'links'")
		}
		for j, l := range e.Links {
			checkTemplate(c, fmt.Sprintf("%s.links[%d].template", key, j), l.Template, templateUse{link: true, rowOK: true, rows: rows})
			if l.Template == "" {
				c.add(fmt.Sprintf("%s.links[%d].template", key, j), "is required")
			}
		}
		checkRenderer(c, key+".renderer", e.View, e.Renderer, known)
	}
}

// checkRenderer checks a renderer name and that only view custom, which
// needs one, sets it (known: the view is one this package knows).
func checkRenderer(c collector, field, view, r string, known bool) {
	checkRendererName(c, field, r)
	switch {
	case view == ViewCustom && r == "":
		c.add(field, "view 'custom' requires a renderer")
	case known && view != ViewCustom && r != "":
		c.add(field, "renderer set on view '%s': only view 'custom' takes one", view)
	}
}
