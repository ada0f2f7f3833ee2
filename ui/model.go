package ui

// Page is a declared UI page, routed at /p/<slug> with one nav entry.
// Its JSON form is one entry of GET /api/v1/pages.
type Page struct {
	Slug    string   `json:"slug" toml:"slug"`
	Title   string   `json:"title" toml:"title"`
	Widgets []Widget `json:"widgets" toml:"widgets"`
}

// Widget is one view on a declared page. View is an open string (an unknown
// view renders a placeholder).
type Widget struct {
	Title       string            `json:"title" toml:"title"`
	View        string            `json:"view" toml:"view"`
	Source      Source            `json:"source" toml:"source"`
	Columns     Columns           `json:"columns,omitempty" toml:"columns,omitempty"`
	Field       string            `json:"field,omitempty" toml:"field,omitempty"`
	BadgeColors map[string]string `json:"badge_colors,omitempty" toml:"badge_colors,omitempty"`
	Format      string            `json:"format,omitempty" toml:"format,omitempty"`
}

// Widget views the UI knows.
const (
	ViewTable    = "table"
	ViewKeyValue = "keyvalue"
	ViewString   = "string"
	ViewBadge    = "badge"
	ViewStat     = "stat"
)

// Source selects the read API a widget's rows come from. Kind is an open
// string; the known kinds share this struct and each uses some fields
// (sourceFields).
type Source struct {
	Kind       string   `json:"kind" toml:"kind"`
	EventTypes []string `json:"event_types,omitempty" toml:"event_types,omitempty"`
	KindPrefix string   `json:"kind_prefix,omitempty" toml:"kind_prefix,omitempty"`
	Limit      *int     `json:"limit,omitempty" toml:"limit,omitempty"` // nil: DefaultSourceLimit after NormalizePages
	Metric     string   `json:"metric,omitempty" toml:"metric,omitempty"`
}

// Source kinds the UI knows.
const (
	SourceEvents      = "events"
	SourceAnnotations = "annotations"
	SourceTasks       = "tasks"
	SourceMetrics     = "metrics"
)

// Limits of declared pages.
const (
	MaxPages           = 20
	MaxWidgets         = 12
	MaxSlugLen         = 40
	MinSourceLimit     = 1
	MaxSourceLimit     = 1000
	DefaultSourceLimit = 200
)

// Column is how one table column renders, in page and probe-details
// tables. Name is the row field it shows.
type Column struct {
	Name         string            `json:"-" toml:"name"`
	Label        string            `json:"label,omitempty" toml:"label,omitempty"`
	LinkTemplate string            `json:"link_template,omitempty" toml:"link_template,omitempty"`
	BadgeColors  map[string]string `json:"badge_colors,omitempty" toml:"badge_colors,omitempty"`
	Format       string            `json:"format,omitempty" toml:"format,omitempty"`
	Hint         string            `json:"hint,omitempty" toml:"hint,omitempty"`
	Renderer     string            `json:"renderer,omitempty" toml:"renderer,omitempty"`
}

// bare reports a column that only names its field.
func (c Column) bare() bool {
	return c.Label == "" && c.LinkTemplate == "" && c.BadgeColors == nil &&
		c.Format == "" && c.Hint == "" && c.Renderer == ""
}

// Columns is an ordered column selection: in JSON a list of names when no
// column carries settings, else an object of name to Column in order; in
// TOML a list of names or an array of tables with a name key (a TOML table
// would lose the order).
type Columns []Column

// Names returns the column names in order.
func (cs Columns) Names() []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Name
	}
	return out
}

// badgeColors are the names allowed in badge_colors values.
var badgeColors = map[string]bool{"green": true, "red": true, "yellow": true, "blue": true, "gray": true, "purple": true}

// BadgeFallback is the badge_colors key for values not listed.
const BadgeFallback = "*"

// formats are the value formats of string fields, stat widgets and columns.
var formats = map[string]bool{"duration_ms": true, "bytes": true, "timestamp": true, "number": true}

// ProbeDetails declares how the UI renders a probe's stdout when it parses
// as a JSON object: one entry per top-level key, in display order.
type ProbeDetails struct {
	Fields []ProbeField `json:"fields" toml:"fields"`
}

// ProbeField is one top-level key of the probe's JSON output. View is an
// open string. RowFields is the row model of a table (a list of rows),
// tables (an object of name to such a list) or tree (rows whose nested rows
// are in TreeChildren).
type ProbeField struct {
	Name         string            `json:"name" toml:"name"`
	Label        string            `json:"label,omitempty" toml:"label,omitempty"`
	View         string            `json:"view" toml:"view"`
	RowFields    []string          `json:"row_fields,omitempty" toml:"row_fields,omitempty"`
	Columns      Columns           `json:"columns,omitempty" toml:"columns,omitempty"`
	LinkTemplate string            `json:"link_template,omitempty" toml:"link_template,omitempty"`
	BadgeColors  map[string]string `json:"badge_colors,omitempty" toml:"badge_colors,omitempty"`
	Format       string            `json:"format,omitempty" toml:"format,omitempty"`
	Hint         string            `json:"hint,omitempty" toml:"hint,omitempty"`
	Renderer     string            `json:"renderer,omitempty" toml:"renderer,omitempty"`
	Detail       *Detail           `json:"detail,omitempty" toml:"detail,omitempty"`
}

// Probe-details views the UI knows.
const (
	ViewTables = "tables"
	ViewTree   = "tree"
	ViewCustom = "custom"
	ViewLinks  = "links"
)

// TreeChildren is the row key holding a tree row's nested rows.
const TreeChildren = "children"

// Detail is the side panel a click on a table, tables or tree row opens.
type Detail struct {
	// Title is a text template; {row.<field>} reads the clicked row.
	Title    string    `json:"title,omitempty" toml:"title"`
	Elements []Element `json:"elements" toml:"elements"`
}

// Element is one block of a detail panel. View is an open string.
type Element struct {
	View     string `json:"view" toml:"view"`
	Field    string `json:"field,omitempty" toml:"field,omitempty"`
	Label    string `json:"label,omitempty" toml:"label,omitempty"`
	Links    []Link `json:"links,omitempty" toml:"links,omitempty"`
	Renderer string `json:"renderer,omitempty" toml:"renderer,omitempty"`
}

// Link is one entry of a links element.
type Link struct {
	Label    string `json:"label" toml:"label,omitempty"`
	Template string `json:"template" toml:"template"`
}

// Limit returns a pointer to n, for Source.Limit literals.
func Limit(n int) *int { return &n }
