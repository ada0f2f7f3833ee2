package httpd

import (
	"fmt"
	"net/http"
	"strings"

	"svc/ui"
	"svc/ui/release"
)

// isPagePath reports a path the bundle answers: everything but the API,
// the live socket and the public probes.
func isPagePath(p string) bool {
	return !strings.HasPrefix(p, "/api/") && p != "/ws" && !isPublic(p)
}

// pageGate runs before the token gate, whose JSON 401 is useless to a
// browser opening a page: assets (no data; the sign-in page needs its
// stylesheet) are served without the token, and a page request without a
// valid one gets the sign-in page (still 401), whose form reloads the page
// with ?token= (the shell then keeps it in sessionStorage, off the address
// bar). Without a token or a bundle it does nothing.
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

// page serves the SPA bundle: 404 when ui.release.enabled is false, 503
// while no bundle is cached.
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
// 503 ui_bundle_missing naming the command that stages tag ("": embedded).
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
