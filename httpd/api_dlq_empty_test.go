package httpd

import (
	"strings"
	"testing"
)

// TestDLQRecordsNoMatch: a filter that matches no DLQ record answers
// "records":[] (an empty list, like "reasons"), never null, so a client
// can iterate the answer as it is.
func TestDLQRecordsNoMatch(t *testing.T) {
	t.Parallel()
	s, brokers := kafkaStack(t, nil)
	produceDLQ(t, brokers, 6)
	r := do(t, "GET", s.uiURL+"/api/v1/debug/dlq/records?key=no-such-key", "")
	if r.status != 200 || !strings.Contains(r.body, `"records":[]`) || !strings.Contains(r.body, `"matched":0`) {
		t.Errorf("dlq/records with no match = %d %s, want 200 with \"records\":[]", r.status, r.body)
	}
}
