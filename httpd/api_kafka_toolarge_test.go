package httpd

import (
	"net/http/httptest"
	"strings"
	"testing"

	"svc/kafkaread"
)

// TestKafkaErrorBatchTooLarge: a batch too large to read answers 422
// batch_too_large with the read's detail (it was a 500).
func TestKafkaErrorBatchTooLarge(t *testing.T) {
	w := httptest.NewRecorder()
	err := &kafkaread.BatchTooLargeError{Alias: "dlq", Partition: 2, From: 40, Next: 50, Bound: kafkaread.MaxReadBatchBytes}
	kafkaError(w, err)
	if body := w.Body.String(); w.Code != 422 || !strings.Contains(body, `"error":"batch_too_large"`) || !strings.Contains(body, "offsets 40-49") {
		t.Errorf("kafkaError(BatchTooLargeError) = %d %s, want 422 batch_too_large naming the offsets", w.Code, body)
	}
}
