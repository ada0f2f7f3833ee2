package httpd

import (
	"net/http"
	"time"

	"svc/kafkaread/triage"
)

// dlqRecords answers one page of the DLQ for triage.
func (s *UIServer) dlqRecords(w http.ResponseWriter, r *http.Request) {
	q, err := parseTriageQuery(r.URL.Query())
	if err != nil {
		kafkaError(w, err)
		return
	}
	// A long scan outlasts the write timeout; the stream guard bounds writes.
	_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
	page, err := triage.Read(r.Context(), s.kafka, q)
	if err != nil {
		kafkaError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, page)
}
