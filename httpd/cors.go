package httpd

import "net/http"

// withCORS wraps one of the three CORS routes (spec 5 item 6).
// TODO(ws helper): origin checks; until then no CORS header is sent.
func (s *UIServer) withCORS(h http.HandlerFunc) http.HandlerFunc { return h }

// corsPreflight answers OPTIONS on a CORS route.
func (s *UIServer) corsPreflight(w http.ResponseWriter, r *http.Request) {
	writeError(w, http.StatusForbidden, "cors_refused", "cross-origin request refused")
}
