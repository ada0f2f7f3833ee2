package httpd

import (
	"fmt"
	"net/http"

	"svc/worker/redrive"
)

// redriveRequest is the body of POST /api/v1/debug/dlq/redrive: an offset
// range, a time window or named records; only "dry_run": false writes.
type redriveRequest struct {
	Records    []redriveAt `json:"records"`
	Partition  *int32      `json:"partition"`
	FromOffset *int64      `json:"from_offset"`
	ToOffset   *int64      `json:"to_offset"`
	FromTS     *int64      `json:"from_ts"`
	ToTS       *int64      `json:"to_ts"`
	Limit      *int        `json:"limit"`
	DryRun     *bool       `json:"dry_run"`
	Again      bool        `json:"again"`
}

type redriveAt struct {
	Partition *int32 `json:"partition"`
	Offset    *int64 `json:"offset"`
}

// dlqRedrive streams one NDJSON line per DLQ record, then a summary line.
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
	case req.Records != nil && (req.Partition != nil || req.FromOffset != nil || req.ToOffset != nil || req.FromTS != nil || req.ToTS != nil || req.Limit != nil):
		writeError(w, http.StatusBadRequest, "bad_request", "records name their own partitions and offsets: give records alone, or a range")
		return
	case req.Records != nil && (len(req.Records) == 0 || len(req.Records) > redrive.MaxSelected):
		writeError(w, http.StatusBadRequest, "bad_request", fmt.Sprintf("records must name 1-%d DLQ records (got %d)", redrive.MaxSelected, len(req.Records)))
		return
	case req.Records != nil:
		for i, at := range req.Records {
			if at.Partition == nil || at.Offset == nil || *at.Partition < 0 || *at.Offset < 0 {
				writeError(w, http.StatusBadRequest, "bad_request", fmt.Sprintf("records[%d] needs a partition and an offset, neither negative", i))
				return
			}
			rr.Records = append(rr.Records, redrive.At{Partition: *at.Partition, Offset: *at.Offset})
		}
	case req.FromOffset == nil && req.FromTS == nil:
		writeError(w, http.StatusBadRequest, "bad_request", "give records, from_offset (with partition, optional to_offset) or from_ts (optional to_ts, partition)")
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
