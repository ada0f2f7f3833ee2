package httpd

import (
	"fmt"
	"net/http"
	"time"
)

// Limits of the long-lived responses (downloads, Kafka NDJSON streams).
const (
	maxStreams        = 8                // at once per worker; more answer 503
	streamWriteWindow = 30 * time.Second // a write that makes no progress for this long ends the stream
)

// streamSlots bounds the long-lived responses of one UI server.
type streamSlots struct {
	slots  chan struct{}
	window time.Duration // streamWriteWindow; tests shorten it
}

func newStreamSlots() *streamSlots {
	return &streamSlots{slots: make(chan struct{}, maxStreams), window: streamWriteWindow}
}

// guard wraps a streaming handler: at most maxStreams run at once, and
// each write gets streamWriteWindow instead of the server's fixed write
// timeout, so only a client that stops reading is cut off.
func (s *streamSlots) guard(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		select {
		case s.slots <- struct{}{}:
		default:
			w.Header().Set("Retry-After", "5")
			writeError(w, http.StatusServiceUnavailable, "too_many_streams",
				fmt.Sprintf("%d downloads or message streams are running; retry when one finished", cap(s.slots)))
			return
		}
		defer func() { <-s.slots }()
		h(&progressWriter{ResponseWriter: w, rc: http.NewResponseController(w), window: s.window}, r)
	}
}

// progressWriter moves the connection's write deadline before every write
// and flush.
type progressWriter struct {
	http.ResponseWriter
	rc     *http.ResponseController
	window time.Duration
}

func (p *progressWriter) Write(b []byte) (int, error) {
	_ = p.rc.SetWriteDeadline(time.Now().Add(p.window))
	return p.ResponseWriter.Write(b)
}

func (p *progressWriter) Flush() {
	_ = p.rc.SetWriteDeadline(time.Now().Add(p.window))
	_ = p.rc.Flush()
}

// Unwrap lets http.NewResponseController reach the connection.
func (p *progressWriter) Unwrap() http.ResponseWriter { return p.ResponseWriter }
