package httpd

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"
)

// Limits of the UI server.
const (
	uiMaxBodyBytes       = 1 << 20
	uiReadTimeout        = 10 * time.Second
	uiReadHeaderTimeout  = 10 * time.Second
	uiWriteTimeout       = 60 * time.Second
	uiIdleTimeout        = 60 * time.Second
	uiMaxHeaderBytes     = 64 << 10
	ingressHeaderTimeout = 10 * time.Second
	uiShutdownGrace      = 2 * time.Second // requests in flight when the UI server stops
)

// limitBody caps every request body at n bytes.
func limitBody(n int64, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > n {
			writeError(w, http.StatusRequestEntityTooLarge, "body_too_large", fmt.Sprintf("request body is %d bytes; the limit is %d", r.ContentLength, n))
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, n)
		next.ServeHTTP(w, r)
	})
}

// bodyError maps a body read or decode error to a response.
func bodyError(w http.ResponseWriter, err error) {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		writeError(w, http.StatusRequestEntityTooLarge, "body_too_large", fmt.Sprintf("request body exceeds the limit of %d bytes", mbe.Limit))
		return
	}
	writeError(w, http.StatusBadRequest, "bad_request", err.Error())
}

// recoverPanics turns a handler panic into a 500 so one bad request never
// kills the worker.
func recoverPanics(log *slog.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				log.Error("handler_panic", "path", r.URL.Path, "panic", fmt.Sprint(v))
				writeError(w, http.StatusInternalServerError, "internal", "the request failed; see the worker log")
			}
		}()
		next.ServeHTTP(w, r)
	})
}
