package httpd

import "net/http"

// websocket serves /ws. TODO(ws helper).
func (s *UIServer) websocket() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotImplemented, "not_implemented", "/ws")
	})
}
