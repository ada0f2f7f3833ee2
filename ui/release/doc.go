// Package release ships and serves the UI bundle whose source is package
// ui: it packs the embedded tree as a release archive (svc-ui-<tag>.tar.gz
// and its .sha256), fetches a release from a mirror, verifies and unpacks
// it under fixed bounds, and keeps it in the per-host cache. Site is the
// worker's page handler: it serves the configured release from the cache
// (or the binary) and fetches a missing one in the background. It also
// owns the sign-in page, the pages' security headers, and the `svc ui`
// command (pack, fetch, help; RunCLI).
//
// # Files
//
//	bundle.go   bundle layout, ArchiveName, Pack (reproducible archives)
//	fetch.go    Fetch: download, checksum, redirects, proxy, timeouts
//	unpack.go   the archive checks and their bounds
//	cache.go    the per-host cache: one directory per tag, atomic publish
//	serve.go    Pages: one loaded release as an http.Handler, CSP headers
//	site.go     Site: which release is served, background fetch
//	signin.go   the sign-in page of a worker with a UI token
//	cli.go      svc ui pack | fetch | help
//
// It uses the standard library and package ui only, and never imports the
// worker or the HTTP server. The release layout, the cache and the bounds
// are documented for operators in docs/ui-release.md.
package release
