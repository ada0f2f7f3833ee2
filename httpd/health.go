package httpd

import (
	"net/http"
	"slices"
	"strings"
)

// healthz answers while the process serves.
func (s *UIServer) healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// readyz answers 200 when every enabled source runs, else 503 with reasons.
func (s *UIServer) readyz(w http.ResponseWriter, r *http.Request) {
	ready, reasons := s.app.Ready()
	if ready {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
		return
	}
	writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "not_ready", "reasons": reasons})
}

// apiNotFound answers an /api/ request no route took: 405 with Allow when
// the path exists for other methods, else 404.
func (s *UIServer) apiNotFound(mux *http.ServeMux, w http.ResponseWriter, r *http.Request) {
	var allow []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pattern := mux.Handler(probe); pattern != "" && pattern != "/api/" {
			allow = append(allow, m)
		}
	}
	if len(allow) > 0 {
		if slices.Contains(allow, http.MethodGet) {
			allow = append(allow, http.MethodHead)
		}
		w.Header().Set("Allow", strings.Join(allow, ", "))
		writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", r.Method+" "+r.URL.Path+" is not served; allowed: "+strings.Join(allow, ", "))
		return
	}
	writeError(w, http.StatusNotFound, "not_found", "no API route "+r.Method+" "+r.URL.Path)
}
