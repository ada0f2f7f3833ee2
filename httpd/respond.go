package httpd

import (
	"bytes"
	"encoding/json"
	"net/http"
	"sync"
)

// ErrorBody is the shape of every non-2xx JSON response.
type ErrorBody struct {
	Error  string `json:"error"`
	Detail string `json:"detail"`
}

// writeJSON writes v as a JSON response with status.
// HTML escaping is off: details such as "Bearer <token>" read as written.
func writeJSON(w http.ResponseWriter, status int, v any) {
	buf := jsonBufs.Get().(*bytes.Buffer)
	defer func() {
		if buf.Cap() <= keptJSONBuf {
			buf.Reset()
			jsonBufs.Put(buf)
		}
	}()
	b := []byte(`{"error":"internal","detail":"cannot encode response"}` + "\n")
	if a, ok := v.(jsonAppender); ok { // the ingress's answers: no reflection
		// In place when it fits the pooled buffer; else the buffer grows
		// by this once, for the next response.
		buf.Write(append(a.AppendJSON(buf.AvailableBuffer()), '\n'))
		b = buf.Bytes()
	} else {
		enc := json.NewEncoder(buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(v); err != nil {
			status = http.StatusInternalServerError
		} else {
			b = buf.Bytes() // Encode ends it with a newline
		}
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(b) // copied into the connection's buffer
}

// jsonAppender is a response body that appends its own JSON encoding,
// the same bytes writeJSON's encoder would give (worker.ExecResponse).
type jsonAppender interface {
	AppendJSON(b []byte) []byte
}

// jsonBufs holds response buffers between requests: a fresh one grew
// through five sizes for a 1 KiB output (the ingress answers every task).
// One larger than keptJSONBuf is left to the collector.
var jsonBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

const keptJSONBuf = 64 << 10

// writeError writes {"error": code, "detail": detail} with status.
func writeError(w http.ResponseWriter, status int, code, detail string) {
	writeJSON(w, status, ErrorBody{Error: code, Detail: detail})
}
