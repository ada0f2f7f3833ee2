package httpd

import (
	"encoding/json"
	"net/http"

	"svc/worker/redrive"
)

// redriveRequest is the body of POST /api/v1/debug/dlq/redrive: an offset
// range of one DLQ partition, or a time window like GET .../messages.
// dry_run defaults to true: only "dry_run": false writes to the source.
type redriveRequest struct {
	Partition  *int32 `json:"partition"`
	FromOffset *int64 `json:"from_offset"`
	ToOffset   *int64 `json:"to_offset"`
	FromTS     *int64 `json:"from_ts"`
	ToTS       *int64 `json:"to_ts"`
	Limit      *int   `json:"limit"`
	DryRun     *bool  `json:"dry_run"`
}

// dlqRedrive streams one NDJSON line per DLQ record (its outcome), then a
// final {"summary": {...}} line; a failure after the first line ends the
// stream with an {"error": ...} line.
func (s *UIServer) dlqRedrive(w http.ResponseWriter, r *http.Request) {
	if s.redrive == nil {
		writeError(w, http.StatusConflict, "no_kafka_source", "redrive re-produces DLQ records to the source topic: this worker has no Kafka source")
		return
	}
	var req redriveRequest
	if err := decodeJSON(r, &req); err != nil {
		bodyError(w, err)
		return
	}
	rr := redrive.Request{Partition: req.Partition, FromOffset: req.FromOffset, ToOffset: req.ToOffset, ToTS: req.ToTS, DryRun: true}
	switch {
	case req.FromOffset == nil && req.FromTS == nil:
		writeError(w, http.StatusBadRequest, "bad_request", "give from_offset (with partition, optional to_offset) or from_ts (optional to_ts, partition)")
		return
	case req.FromOffset != nil && req.FromTS != nil:
		writeError(w, http.StatusBadRequest, "bad_request", "give an offset range or a time window, not both")
		return
	case req.FromOffset != nil && req.Partition == nil:
		writeError(w, http.StatusBadRequest, "bad_request", "an offset range needs a partition")
		return
	case req.Limit != nil && (*req.Limit < 1 || *req.Limit > redrive.MaxRecords):
		writeError(w, http.StatusBadRequest, "bad_request", "limit must be 1-10000")
		return
	}
	if req.FromTS != nil {
		rr.FromTS = *req.FromTS
	}
	if req.Limit != nil {
		rr.Limit = *req.Limit
	}
	if req.DryRun != nil {
		rr.DryRun = *req.DryRun
	}
	enc, started := json.NewEncoder(w), false
	begin := func() {
		if !started {
			started = true
			w.Header().Set("Content-Type", "application/x-ndjson")
			w.Header().Set("Cache-Control", "no-store")
			w.WriteHeader(http.StatusOK)
		}
	}
	rc := http.NewResponseController(w)
	sum, err := s.redrive.Run(r.Context(), rr, func(l redrive.Line) error {
		begin()
		if err := enc.Encode(l); err != nil {
			return err
		}
		return rc.Flush()
	})
	switch {
	case err != nil && !started && r.Context().Err() == nil:
		kafkaError(w, err)
	case err != nil && started:
		_, _ = w.Write(errorLine(err))
	default:
		begin()
		_ = enc.Encode(map[string]any{"summary": sum})
	}
}
