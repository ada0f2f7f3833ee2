package httpd

import "net/http"

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

func (s *UIServer) apiNotFound(w http.ResponseWriter, r *http.Request) {
	writeError(w, http.StatusNotFound, "not_found", "no API route "+r.Method+" "+r.URL.Path)
}
