package recorder

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"
)

// BenchmarkIngest measures events per second stored in the live file through
// Event and the batching writer. The loop waits for room in the queue, so it
// measures storage throughput rather than drops.
func BenchmarkIngest(b *testing.B) {
	clk := newClock()
	cfg := baseConfig(b, b.TempDir(), "", "w1", clk)
	cfg.Now = time.Now
	r := mustOpen(b, cfg)
	startRun(b, r)
	payload := json.RawMessage(`{"status":"ok","exit_code":0,"duration_ms":12,"output_size_bytes":512}`)
	labels := map[string]string{"customer": "acme", "region": "eu"}
	var n uint64
	start := time.Now()
	for b.Loop() {
		for len(r.in) == cap(r.in) {
			runtime.Gosched()
		}
		r.Event(Event{Type: TypeExecutorFinished, TaskID: "task-" + strconv.FormatUint(n/4, 10), Labels: labels, Payload: payload})
		n++
	}
	waitWritten(b, r, n, 0)
	elapsed := time.Since(start)
	b.ReportMetric(float64(n)/elapsed.Seconds(), "events/s")
	if d := r.Stats().EventsDropped; d != 0 {
		b.Fatalf("%d events dropped", d)
	}
}

// BenchmarkTrace measures one Trace over 1,000,000 events in 50 sealed
// files (20,000 each; 100,000 tasks of 10 events spread over the files).
// The fixture is built once per run, with bulk inserts.
func BenchmarkTrace(b *testing.B) {
	const files, perFile, tasks = 50, 20000, 100000
	shared := b.TempDir()
	built := time.Now()
	buildTraceFixture(b, shared, files, perFile, tasks)
	b.Logf("fixture: %d events in %d files built in %s", files*perFile, files, time.Since(built).Round(time.Millisecond))
	r := mustOpen(b, Config{SharedDir: shared, Worker: "reader", Cluster: "c1", Logger: testLogger(b)})
	i := 0
	for b.Loop() {
		evs, err := r.Trace(context.Background(), fmt.Sprintf("task-%d", i%tasks))
		if err != nil || len(evs) != files*perFile/tasks {
			b.Fatalf("Trace() = %d events, %v; want %d", len(evs), err, files*perFile/tasks)
		}
		i += 7919
	}
}

// buildTraceFixture writes sealed files history/c1/w<k>-<from>-<to>.db.
func buildTraceFixture(b *testing.B, shared string, files, perFile, tasks int) {
	dir := filepath.Join(shared, "history", "c1")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	payload := `{"status":"ok","exit_code":0,"duration_ms":12,"output_size_bytes":512}`
	for f := range files {
		from := int64(t0 + f*60000)
		path := filepath.Join(dir, fmt.Sprintf("w%d-%d-%d.db", f%5, from, from+60000))
		db, err := openBuildDB(ctx, path)
		if err != nil {
			b.Fatal(err)
		}
		db.Exec(`PRAGMA journal_mode=OFF`)
		db.Exec(`PRAGMA synchronous=OFF`)
		tx, _ := db.Begin()
		st, err := tx.Prepare(`INSERT INTO events(id, ts_ms, type, kind, task_id, worker, labels, payload) VALUES(?, ?, ?, '', ?, ?, '{}', ?)`)
		if err != nil {
			b.Fatal(err)
		}
		for i := range perFile {
			n := f*perFile + i
			if _, err := st.Exec(n+1, from+int64(i), TypeExecutorFinished, "task-"+strconv.Itoa(n%tasks), fmt.Sprintf("w%d", f%5), payload); err != nil {
				b.Fatal(err)
			}
		}
		if err := tx.Commit(); err != nil {
			b.Fatal(err)
		}
		setMeta(ctx, db, "format", "1", "kind", "sealed", "worker", fmt.Sprintf("w%d", f%5), "cluster", "c1",
			"from_ms", strconv.FormatInt(from, 10), "to_ms", strconv.FormatInt(from+60000, 10))
		db.Close()
	}
}
