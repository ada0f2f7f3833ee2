package httpd

import (
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"svc/kafkaread"
)

// kafkaTopics lists the readable aliases (never raw topic names).
func (s *UIServer) kafkaTopics(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"topics": s.kafka.Topics()})
}

// kafkaMessage reads one record by partition and offset.
func (s *UIServer) kafkaMessage(w http.ResponseWriter, r *http.Request) {
	partition, offset, err := parseMessageQuery(r.URL.Query())
	if err != nil {
		kafkaError(w, err)
		return
	}
	rec, err := s.kafka.Message(r.Context(), r.PathValue("alias"), partition, offset)
	if err != nil {
		kafkaError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, rec)
}

// kafkaMessages streams a time window as NDJSON, flushing every line. An
// error before the first line is a status code; after it, a final line
// carrying "error".
func (s *UIServer) kafkaMessages(w http.ResponseWriter, r *http.Request) {
	q, err := parseStreamQuery(r.URL.Query())
	if err != nil {
		kafkaError(w, err)
		return
	}
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{}) // a long window may stream for a while
	enc, started := json.NewEncoder(w), false
	begin := func() {
		if !started {
			started = true
			w.Header().Set("Content-Type", "application/x-ndjson")
			w.Header().Set("Cache-Control", "no-store")
			w.Header().Set("X-Content-Type-Options", "nosniff")
			w.WriteHeader(http.StatusOK)
		}
	}
	err = s.kafka.Stream(r.Context(), r.PathValue("alias"), q, func(rec kafkaread.Record) error {
		begin()
		if err := enc.Encode(rec); err != nil {
			return err
		}
		return rc.Flush()
	})
	switch {
	case err != nil && !started && r.Context().Err() == nil:
		kafkaError(w, err)
	case err != nil && started && r.Context().Err() == nil:
		_, _ = w.Write(errorLine(err))
	default:
		begin()
	}
}

// kafkaError answers a read API error: 404 for anything not found
// (alias, partition, offset), 400 for a bad query, 502 for broker timeouts
// and failures, 500 otherwise.
func kafkaError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, kafkaread.ErrNotFound):
		writeError(w, http.StatusNotFound, "not_found", err.Error())
	case errors.Is(err, kafkaread.ErrBadQuery):
		writeError(w, http.StatusBadRequest, "bad_request", err.Error())
	case errors.Is(err, kafkaread.ErrBrokerTimeout), errors.Is(err, kafkaread.ErrBrokerFailure):
		writeError(w, http.StatusBadGateway, "broker_unavailable", err.Error())
	default:
		writeError(w, http.StatusInternalServerError, "internal", err.Error())
	}
}

// errorLine is the final NDJSON line of a stream that failed after its
// first line: {"error": "<detail>"}; a client treats any line with an
// "error" key as a terminated stream.
func errorLine(err error) []byte {
	b, _ := json.Marshal(map[string]string{"error": err.Error()})
	return append(b, '\n')
}
