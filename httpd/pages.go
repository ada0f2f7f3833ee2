package httpd

import (
	"fmt"
	"net/http"
	"strings"

	"svc/ui"
	"svc/ui/release"
)

// Page serving and the page token flow. The token gate (requireToken)
// answers every request without a valid token with a JSON 401, which is
// right for the API but useless to a browser opening a page, so pageGate
// runs before it: static assets carry no data and are served without the
// token (a sign-in page needs its stylesheet), and a page request without
// a valid token gets the sign-in page (still 401).
//
// The flow: the sign-in form reloads the page with ?token=; the shell then
// moves the token into sessionStorage and drops it from the address bar
// with history.replaceState, so it is sent as an Authorization header from
// then on. The token never reaches a log line (only paths are logged) or
// the flight recorder (which records tasks, not HTTP requests).

// isPagePath reports a path the bundle answers: everything but the API,
// the live socket and the public probes.
func isPagePath(p string) bool {
	return !strings.HasPrefix(p, "/api/") && p != "/ws" && !isPublic(p)
}

// pageGate serves assets without the token and answers page requests that
// lack a valid one with the sign-in page; everything else goes to next.
// It does nothing when no token is set or no bundle is configured (an
// API-only worker keeps the JSON answers).
func (s *UIServer) pageGate(next http.Handler) http.Handler {
	check := newTokenCheck(s.cfg.UI.AuthToken)
	if !check.set {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case s.bundle == nil || !isPagePath(r.URL.Path):
			next.ServeHTTP(w, r)
		case release.IsAssetPath(r.URL.Path):
			s.page(w, r)
		case check.matches(uiToken(r)):
			next.ServeHTTP(w, r)
		default:
			release.WriteSignIn(w, r, s.bundleTag(), uiToken(r) != "")
		}
	})
}

// bundleTag is the UI release being served, "" when none is loaded.
func (s *UIServer) bundleTag() string {
	if t, ok := s.bundle.(interface{ Tag() string }); ok {
		return t.Tag()
	}
	return ""
}

// page serves the SPA bundle: 404 when ui.release.enabled is false (the
// worker serves /api/v1 and the probes only), 503 while no bundle is
// cached.
func (s *UIServer) page(w http.ResponseWriter, r *http.Request) {
	switch {
	case !s.cfg.UI.Release.Enabled:
		writeError(w, http.StatusNotFound, "not_found",
			"ui.release.enabled is false: this worker serves /api/v1 and the probes only")
	case s.bundle == nil:
		BundleUnavailable(s.cfg.UI.Release.Version).ServeHTTP(w, r)
	default:
		s.bundle.ServeHTTP(w, r)
	}
}

// BundleUnavailable answers page requests while no UI bundle is cached:
// 503 ui_bundle_missing naming the command that stages release tag ("" is
// the release embedded in this binary).
func BundleUnavailable(tag string) http.Handler {
	if tag == "" {
		tag = ui.EmbeddedTag
	}
	detail := fmt.Sprintf("no UI bundle %s is cached on this host: the worker is API-only until one is; stage it with `svc ui fetch --version=%s` (or set ui.release.repo to a reachable mirror)", tag, tag)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "60")
		writeError(w, http.StatusServiceUnavailable, "ui_bundle_missing", detail)
	})
}
