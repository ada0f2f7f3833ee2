package httpd

import (
	"net/http"
	"strconv"
)

// CORS answers of the cross-origin routes. Only
// withCORS and corsPreflight send CORS headers; no other path does.
const (
	corsAllowMethods = "GET, OPTIONS"
	corsAllowHeaders = "Authorization"
	corsMaxAge       = 600 // seconds a browser may cache a preflight answer
)

// withCORS wraps one of the CORS routes (trace, trace-by-label,
// databases). The read is always served, since the token gate in front of
// it decides access; only a request whose Origin passes originAllowed gets
// Access-Control-Allow-Origin, so the browser hands a refused origin no
// response. The allowed origin is echoed, never "*", and the answer varies
// by Origin for caches.
//
// No Access-Control-Allow-Credentials: the token travels in the
// Authorization header (or ?token=), never in a cookie, so the pages never
// need a credentialed request, and leaving it out keeps any ambient browser
// credentials out of cross-origin reads.
func (s *UIServer) withCORS(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Add("Vary", "Origin")
		if origin := r.Header.Get("Origin"); origin != "" && s.originAllowed(r) {
			w.Header().Set("Access-Control-Allow-Origin", origin)
		}
		h(w, r)
	}
}

// corsPreflight answers OPTIONS on a CORS route. It needs no token (the
// token gate lets preflights through) and grants only what the routes use:
// GET with an Authorization header. A refused origin, or a preflight for
// another method, answers 403 cors_refused with the reason. An OPTIONS
// without Origin is not a preflight and gets a plain 204 with Allow.
func (s *UIServer) corsPreflight(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Add("Vary", "Origin")
	origin := r.Header.Get("Origin")
	if origin == "" {
		h.Set("Allow", corsAllowMethods)
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if ok, reason := s.originCheck(r); !ok {
		writeError(w, http.StatusForbidden, "cors_refused", reason)
		return
	}
	switch m := r.Header.Get("Access-Control-Request-Method"); m {
	case http.MethodGet, http.MethodHead, "":
	default:
		writeError(w, http.StatusForbidden, "cors_refused", "method "+strconv.Quote(m)+" is not allowed; this route answers GET only")
		return
	}
	h.Set("Access-Control-Allow-Origin", origin)
	h.Set("Access-Control-Allow-Methods", corsAllowMethods)
	h.Set("Access-Control-Allow-Headers", corsAllowHeaders)
	h.Set("Access-Control-Max-Age", strconv.Itoa(corsMaxAge))
	w.WriteHeader(http.StatusNoContent)
}
