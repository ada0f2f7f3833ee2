// Package ui holds the browser UI's models and its source: the
// declared-pages and probe-details models with their validation, link
// templates and link bases, and the SPA bundle embedded from web/ with its
// release tag (EmbeddedTag, Embedded, CheckTag). It uses the standard
// library only and never imports the worker or the HTTP server. The worker
// config keeps the declarations as plain tables; the composition root
// (httpd/root) reads them into these types and validates them at load
// (CheckDeclarations, CheckLinkBases), and at start a Go handler's hooks
// (Pager, ProbeDetailer).
//
// Releasing and serving a bundle (pack, fetch, verify, unpack, the per-host
// cache, the page handler, the sign-in page and the `svc ui` command) is
// package ui/release.
//
// # Declaring pages and probe details in TOML
//
// The built-in exec handler reads both from its [handler] table:
//
//	[[handler.ui_pages]]
//	slug  = "orders"                # ^[a-z][a-z0-9-]*$, at most 40, unique
//	title = "Orders"                # nav entry; empty means the slug
//
//	  [[handler.ui_pages.widgets]]  # at most 12 per page, 20 pages
//	  title = "Recent orders"
//	  view  = "table"               # table, keyvalue, string, badge, stat
//	  source = { kind = "annotations", kind_prefix = "order.", limit = 100 }
//
//	    [[handler.ui_pages.widgets.columns]]   # or columns = ["a", "b"]
//	    name = "order_id"
//	    link_template = "{shop}/orders/{value}"
//
//	[[handler.probe_details.fields]]
//	name = "items"                  # top-level key of the probe's JSON stdout
//	view = "table"                  # string, keyvalue, table, tables, tree, badge, custom
//	row_fields = ["sku", "qty"]     # the row model of table, tables and tree
//
// Columns are a list (names, or tables with a name key) because a TOML table
// would lose their order. Source kinds are events (event_types, limit),
// annotations (kind_prefix, limit), tasks (limit) and metrics (metric);
// limit is 1-1000 and NormalizePages sets 200 when it is omitted. The
// complete example is testdata/config/valid/ui-pages.toml.
//
// # Wire shape
//
// GET /api/v1/pages answers the validated, normalized []Page as JSON with
// the spec's field names. columns is a list of names when no column carries
// settings, else an object of name to column in declaration order. The
// probe response carries the ProbeDetails JSON: {"fields": [ProbeField...]}.
//
// # The SPA (web/)
//
// web/index.html is the shell of every page, web/404.html the not-found
// page; both name their files under %SVC_ASSETS%, which ui/release
// replaces with the versioned /assets/<tag> when serving. web/assets holds plain ES modules and CSS, no build step:
// app.js (router, nav, token flow), api.js (token, JSON, NDJSON, /ws URLs),
// dom.js (elements, times, formats), render.js (templates, badges, custom
// renderers, tables, detail panels), socket.js (/ws with per-frame
// batching) and pages/ (one module per page or Debug tab, loaded on
// demand). Any change under web/ needs a new EmbeddedTag.
//
// # Templates
//
// Link templates and hints use {value}, {row.<field>} and {<base>}; see
// Template. A link must start with a {base} token, http://, https:// or /.
package ui
