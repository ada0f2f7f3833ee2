package httpd

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"svc/recorder"
	"svc/worker/event"
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
	old.Event(event.Event{Type: event.TypeTaskReceived, TaskID: "t1"})
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

// TestHistoryUsageInAPI: the databases list and the dashboard counts tell
// how far back the cluster's history goes and what it takes against its
// budget; a memory-only worker without a shared folder keeps none.
func TestHistoryUsageInAPI(t *testing.T) {
	t.Parallel()
	cfg := diskConfig(t, "/bin/cat")
	s := startStack(t, cfg)
	ocfg := diskConfig(t, "/bin/cat")
	ocfg.Worker.Name, ocfg.Shared.Dir = "other", cfg.Shared.Dir
	o := startStack(t, ocfg)
	do(t, "POST", o.inURL+"/v1/process", "one")
	o.stop() // seals its live file into the shared history

	var got struct {
		Databases []recorder.Database   `json:"databases"`
		History   recorder.HistoryUsage `json:"history"`
	}
	if err := json.Unmarshal([]byte(do(t, "GET", s.uiURL+"/api/v1/debug/databases", "").body), &got); err != nil {
		t.Fatal(err)
	}
	var sealed recorder.Database
	for _, d := range got.Databases {
		if d.Kind == "sealed" && d.Worker == "other" {
			sealed = d
		}
	}
	h := got.History
	if sealed.Path == "" || h.OldestMs != sealed.FromMs || h.SealedBytes < sealed.SizeBytes || h.Bytes != h.SealedBytes+h.ArchiveBytes ||
		h.LiveBytes <= 0 || !h.Retention || h.MaxBytes != cfg.History.MaxBytes || h.MaxAgeMs != cfg.History.MaxAge.D().Milliseconds() || h.UpdatedMs <= 0 {
		t.Errorf("databases history = %+v, want the other worker's sealed file (%+v) as the oldest, its bytes, this live file and the budget", h, sealed)
	}
	var counts struct {
		History recorder.HistoryUsage `json:"history"`
	}
	if err := json.Unmarshal([]byte(do(t, "GET", s.uiURL+"/api/v1/dashboard/counts", "").body), &counts); err != nil {
		t.Fatal(err)
	}
	if c := counts.History; c.OldestMs != h.OldestMs || c.SealedBytes != h.SealedBytes || c.MaxBytes != h.MaxBytes {
		t.Errorf("counts history = %+v, want what databases measured: %+v", c, h)
	}

	m := startStack(t, testConfig(t, "/bin/cat")) // storage.dir and shared.dir empty
	if r := do(t, "GET", m.uiURL+"/api/v1/dashboard/counts", ""); !strings.Contains(r.body, `"history":{"oldest_ms":0,"bytes":0,`) || !strings.Contains(r.body, `"retention":false`) {
		t.Errorf("memory-only counts = %s, want an empty history without retention", r.body)
	}
}
