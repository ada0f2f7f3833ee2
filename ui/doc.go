// Package ui holds the browser UI's models and its source: the
// declared-pages and probe-details models with their validation, link
// templates and link bases, and the SPA bundle embedded from web/ with its
// release tag (EmbeddedTag, Embedded, CheckTag). It uses the standard
// library only and never imports the worker or the HTTP server. The worker
// config keeps the declarations as plain tables; the composition root
// (httpd/root) reads them into these types and validates them at load
// (CheckDeclarations, CheckLinkBases), and at start a Go handler's hooks
// (Pager, ProbeDetailer). Releasing and serving the bundle is package
// ui/release.
//
// Operators declare pages and probe details in TOML as docs/ui.md
// ("Declared pages", "Debug") describes; the complete example is
// testdata/config/valid/ui-pages.toml. GET /api/v1/pages answers the
// validated, normalized []Page as JSON (docs/api.md).
//
// web/ holds plain ES modules and CSS, no build step; its shells name their
// files under %SVC_ASSETS%, which ui/release replaces with /assets/<tag>.
// Any change under web/ needs a new EmbeddedTag.
package ui
