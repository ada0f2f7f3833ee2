package httpd

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"svc/recorder"
	"svc/worker/workertest"
	"svc/worker/workertest/wait"
)

// TestRecorderRetentionMetrics: a sealed file older than history.max_age,
// left by a worker ten days ago, is deleted by the archive pass of a
// running worker, and the exporter counts it in
// svc_recorder_deleted_total{reason="age"}; svc_recorder_bytes shows what
// the history takes before and after.
func TestRecorderRetentionMetrics(t *testing.T) {
	t.Parallel()
	shared := t.TempDir()
	past := func() time.Time { return time.Now().Add(-10 * 24 * time.Hour) }
	old, err := recorder.Open(context.Background(), recorder.Config{Dir: t.TempDir(), SharedDir: shared,
		Worker: "gone", Cluster: "c1", Now: past, StartedAt: past()})
	if err != nil {
		t.Fatal(err)
	}
	old.Event(recorder.Event{Type: recorder.TypeTaskReceived, TaskID: "t1"})
	if err := old.Close(); err != nil { // seals the live file into history/c1/
		t.Fatal(err)
	}

	rec, err := recorder.Open(context.Background(), recorder.Config{SharedDir: shared, Worker: "w", Cluster: "c1",
		ArchiveEnabled: true, ArchiveWindow: time.Second, MaxAge: 7 * 24 * time.Hour, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rec.Close() })
	reg := prometheus.NewRegistry()
	RegisterRecorderMetrics(reg, rec)
	for _, reason := range []string{"age", "budget", "merged_retention"} {
		if got := workertest.Metric(t, reg, "svc_recorder_deleted_total", "reason", reason); got != 0 {
			t.Errorf("svc_recorder_deleted_total{reason=%q} = %v before any pass, want 0", reason, got)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rec.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	wait.For(t, wait.Long, "the expired sealed file deleted and counted", func() (bool, string) {
		n := workertest.Metric(t, reg, "svc_recorder_deleted_total", "reason", "age")
		return n == 1, fmt.Sprintf("svc_recorder_deleted_total{reason=\"age\"} = %v", n)
	})
	wait.For(t, wait.Long, "the history measured empty", func() (bool, string) {
		n := workertest.Metric(t, reg, "svc_recorder_bytes", "kind", "sealed")
		return n == 0, fmt.Sprintf("svc_recorder_bytes{kind=\"sealed\"} = %v", n)
	})
	for _, kind := range []string{"live", "archive", "merged"} {
		if got := workertest.Metric(t, reg, "svc_recorder_bytes", "kind", kind); got != 0 {
			t.Errorf("svc_recorder_bytes{kind=%q} = %v, want 0 (memory-only worker, no archive or merge result)", kind, got)
		}
	}
}
