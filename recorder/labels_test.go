package recorder

import (
	"fmt"
	"testing"

	"svc/worker/event"
)

// TestLabelSearchNewestFirst: a label on 300 tasks answers its newest 100
// (newest first) from the live file and, the same, from the sealed file;
// a search by the label's name alike.
func TestLabelSearchNewestFirst(t *testing.T) {
	t.Parallel()
	clk := newClock()
	r := mustOpen(t, baseConfig(t, t.TempDir(), t.TempDir(), "w1", clk))
	startRun(t, r)
	const n = 300
	for i := range n {
		r.Task(event.TaskRow{TaskID: fmt.Sprintf("t%03d", i), TSms: clk.tick().UnixMilli(), Source: "http", Status: "ok", Attempts: 1,
			Labels: map[string]string{"batch": "x", "shard": fmt.Sprint(i % 3)}})
	}
	waitWritten(t, r, 0, n)
	check := func(where string) {
		t.Helper()
		for _, q := range []struct {
			name  string
			value *string
		}{{"batch", ptr("x")}, {"batch", nil}} {
			rows, err := r.TraceByLabelIn(t.Context(), q.name, q.value, 100, ScopeCluster)
			if err != nil || len(rows) != 100 {
				t.Fatalf("%s: label %s=%v: %d rows, %v; want 100", where, q.name, q.value, len(rows), err)
			}
			for i, row := range rows {
				if want := fmt.Sprintf("t%03d", n-1-i); row.TaskID != want {
					t.Fatalf("%s: label %s=%v row %d = %s, want %s (newest first)", where, q.name, q.value, i, row.TaskID, want)
				}
			}
		}
		rows, err := r.TraceByLabel(t.Context(), "shard", "1", 5)
		if err != nil || len(rows) != 5 || rows[0].TaskID != "t298" || rows[4].TaskID != "t286" {
			t.Fatalf("%s: shard=1: %+v, %v; want t298 ... t286", where, rows, err)
		}
	}
	check("live file")
	seal(t, r)
	check("sealed file")
}

func ptr(s string) *string { return &s }
