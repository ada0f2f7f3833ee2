package httpd

import (
	"bytes"
	"encoding/json"
	"net/http"
)

// ErrorBody is the shape of every non-2xx JSON response.
type ErrorBody struct {
	Error  string `json:"error"`
	Detail string `json:"detail"`
}

// writeJSON writes v as a JSON response with status.
// HTML escaping is off: details such as "Bearer <token>" read as written.
func writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	b := []byte(`{"error":"internal","detail":"cannot encode response"}`)
	if err := enc.Encode(v); err != nil {
		status = http.StatusInternalServerError
	} else {
		b = bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// writeError writes {"error": code, "detail": detail} with status.
func writeError(w http.ResponseWriter, status int, code, detail string) {
	writeJSON(w, status, ErrorBody{Error: code, Detail: detail})
}
