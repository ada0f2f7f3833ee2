package httpd

import (
	"net/http"
	"time"

	"svc/kafkaread/triage"
)

// dlqRecords answers one page of the DLQ for triage: newest first, or
// the page before or after a cursor, filtered, with the reasons counted
// over the records scanned.
func (s *UIServer) dlqRecords(w http.ResponseWriter, r *http.Request) {
	q, err := parseTriageQuery(r.URL.Query())
	if err != nil {
		kafkaError(w, err)
		return
	}
	// A scan of many records may take longer than the server's write
	// timeout; the stream guard bounds each write instead.
	_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
	page, err := triage.Read(r.Context(), s.kafka, q)
	if err != nil {
		kafkaError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, page)
}
