// Package release ships and serves the UI bundle whose source is package
// ui: it packs the embedded tree as a release archive, fetches a release
// from a mirror, verifies and unpacks it under fixed bounds, and keeps it
// in the per-host cache. Site is the worker's page handler; the package
// also owns the sign-in page, the pages' security headers and the `svc ui`
// command (RunCLI). It imports the standard library and package ui only.
// docs/ui-release.md documents the layout, the cache and the bounds.
package release
