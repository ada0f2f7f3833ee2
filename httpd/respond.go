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

// writeJSON writes v as a JSON response with status, HTML escaping off
// (details such as "Bearer <token>" read as written).
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

// jsonAppender is a response body that appends its own JSON encoding, the
// bytes the encoder would give (worker.ExecResponse).
type jsonAppender interface {
	AppendJSON(b []byte) []byte
}

// jsonBufs holds response buffers between requests (a fresh one grows
// several times per answer); one over keptJSONBuf goes to the collector.
var jsonBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

const keptJSONBuf = 64 << 10

func writeError(w http.ResponseWriter, status int, code, detail string) {
	writeJSON(w, status, ErrorBody{Error: code, Detail: detail})
}
