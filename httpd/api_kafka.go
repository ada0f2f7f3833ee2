package httpd

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"time"

	"svc/kafkaread"
	"svc/worker/redrive"
)

// kafkaTopics lists the readable aliases (never raw topic names).
func (s *UIServer) kafkaTopics(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"topics": s.kafka.Topics()})
}

// kafkaMessage reads one record by partition and offset.
func (s *UIServer) kafkaMessage(w http.ResponseWriter, r *http.Request) {
	partition, offset, iso, err := parseMessageQuery(r.URL.Query())
	if err != nil {
		kafkaError(w, err)
		return
	}
	rec, err := s.kafka.Message(r.Context(), r.PathValue("alias"), partition, offset, iso)
	if err != nil {
		kafkaError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, rec)
}

// kafkaMessages streams a time window as NDJSON (ndjsonWriter).
func (s *UIServer) kafkaMessages(w http.ResponseWriter, r *http.Request) {
	q, err := parseStreamQuery(r.URL.Query())
	if err != nil {
		kafkaError(w, err)
		return
	}
	nd := newNDJSON(w)
	_ = nd.rc.SetWriteDeadline(time.Time{}) // a long window may stream for a while
	err = s.kafka.Stream(r.Context(), r.PathValue("alias"), q, func(rec kafkaread.Record) error { return nd.line(rec) })
	nd.end(r, err)
}

// ndjsonWriter writes one JSON value a line and flushes each. The status
// goes out with the first line: an error before it is a status code, one
// after it a final {"error": ...} line (a client treats any line with an
// "error" key as a terminated stream).
type ndjsonWriter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	enc     *json.Encoder
	started bool
}

func newNDJSON(w http.ResponseWriter) *ndjsonWriter {
	return &ndjsonWriter{w: w, rc: http.NewResponseController(w), enc: json.NewEncoder(w)}
}

func (n *ndjsonWriter) begin() {
	if !n.started {
		n.started = true
		n.w.Header().Set("Content-Type", "application/x-ndjson")
		n.w.Header().Set("Cache-Control", "no-store")
		n.w.Header().Set("X-Content-Type-Options", "nosniff")
		n.w.WriteHeader(http.StatusOK)
	}
}

// line writes v as one line and flushes it. A value that writes its own
// line (kafkaread.Record) is not held whole in memory.
func (n *ndjsonWriter) line(v any) error {
	n.begin()
	if lw, ok := v.(interface{ WriteJSONLine(io.Writer) error }); ok {
		if err := lw.WriteJSONLine(n.w); err != nil {
			return err
		}
	} else if err := n.enc.Encode(v); err != nil {
		return err
	}
	return n.rc.Flush()
}

// end closes a stream that stopped with err (nothing when the client is
// gone) and reports whether it ended well (an empty one answers 200).
func (n *ndjsonWriter) end(r *http.Request, err error) bool {
	switch {
	case err != nil && r.Context().Err() != nil:
		return false
	case err != nil && !n.started:
		kafkaError(n.w, err)
		return false
	case err != nil:
		_, _ = n.w.Write(errorLine(err))
		return false
	}
	n.begin()
	return true
}

// kafkaError answers a read API error: 404 for anything not found
// (alias, partition, offset), 400 for a bad query, 422 for a batch too
// large to read, 502 for broker timeouts and failures, 500 otherwise.
func kafkaError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, kafkaread.ErrNotFound):
		writeError(w, http.StatusNotFound, "not_found", err.Error())
	case errors.Is(err, kafkaread.ErrBadQuery):
		writeError(w, http.StatusBadRequest, "bad_request", err.Error())
	case errors.Is(err, kafkaread.ErrTooLarge):
		writeError(w, http.StatusUnprocessableEntity, "batch_too_large", err.Error())
	case errors.Is(err, redrive.ErrBusy):
		writeError(w, http.StatusConflict, "redrive_in_progress", err.Error())
	case errors.Is(err, kafkaread.ErrBrokerTimeout), errors.Is(err, kafkaread.ErrBrokerFailure):
		writeError(w, http.StatusBadGateway, "broker_unavailable", err.Error())
	default:
		writeError(w, http.StatusInternalServerError, "internal", err.Error())
	}
}

// errorLine is the final line of a stream that failed after its first.
func errorLine(err error) []byte {
	b, _ := json.Marshal(map[string]string{"error": err.Error()})
	return append(b, '\n')
}
