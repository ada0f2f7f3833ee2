package httpd

import (
	"encoding/json"
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
	partition, offset, err := kafkaread.ParseMessageQuery(r.URL.Query())
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
// carrying "error" (spec 4, stream rule 9).
func (s *UIServer) kafkaMessages(w http.ResponseWriter, r *http.Request) {
	q, err := kafkaread.ParseStreamQuery(r.URL.Query())
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
		_, _ = w.Write(kafkaread.ErrorLine(err))
	default:
		begin()
	}
}

func kafkaError(w http.ResponseWriter, err error) {
	status := kafkaread.Status(err)
	code := map[int]string{404: "not_found", 400: "bad_request", 502: "broker_unavailable"}[status]
	if code == "" {
		code = "internal"
	}
	writeError(w, status, code, err.Error())
}
