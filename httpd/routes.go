package httpd

import "net/http"

// routes lists every route of the UI server.
func (s *UIServer) routes() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", s.healthz)
	mux.HandleFunc("GET /readyz", s.readyz)

	mux.HandleFunc("GET /api/v1/identity", s.identity)
	mux.HandleFunc("GET /api/v1/config", s.config)
	mux.HandleFunc("GET /api/v1/debug/metrics", s.debugMetrics)
	mux.HandleFunc("GET /api/v1/pages", s.pages)
	mux.HandleFunc("GET /api/v1/ui/renderers.js", s.renderers)

	mux.HandleFunc("/api/", s.apiNotFound)
	mux.HandleFunc("/", s.page)
	return mux
}
