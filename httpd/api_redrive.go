package httpd

import (
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
	Again      bool   `json:"again"`
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
	rr.Again = req.Again
	nd := newNDJSON(w)
	sum, err := s.redrive.Run(r.Context(), rr, func(l redrive.Line) error { return nd.line(l) })
	if nd.end(r, err) {
		_ = nd.line(map[string]any{"summary": sum})
	}
}
