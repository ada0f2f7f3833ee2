package httpd

import (
	"net/http"
	"strconv"
)

// CORS answers: only withCORS and corsPreflight send CORS headers.
const (
	corsAllowMethods = "GET, OPTIONS"
	corsAllowHeaders = "Authorization"
	corsMaxAge       = 600 // seconds a browser may cache a preflight answer
)

// withCORS wraps a CORS route. The token gate in front decides access;
// only an allowed Origin gets Access-Control-Allow-Origin (echoed, never
// "*"), so the browser hands a refused one no response. No
// Access-Control-Allow-Credentials: the token is never a cookie, so
// ambient browser credentials stay out of cross-origin reads.
func (s *UIServer) withCORS(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Add("Vary", "Origin")
		if origin := r.Header.Get("Origin"); origin != "" && s.originAllowed(r) {
			w.Header().Set("Access-Control-Allow-Origin", origin)
		}
		h(w, r)
	}
}

// corsPreflight answers OPTIONS on a CORS route (no token needed): it
// grants only GET with an Authorization header. An OPTIONS without Origin
// is not a preflight and gets a plain 204 with Allow.
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
