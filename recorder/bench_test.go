package recorder

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"zombiezen.com/go/sqlite"

	"svc/worker/event"
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
		for r.queued.Load() == int64(r.cfg.BufferSize) {
			runtime.Gosched()
		}
		r.Event(event.Event{Type: event.TypeExecutorFinished, TaskID: "task-" + strconv.FormatUint(n/4, 10), Labels: labels, Payload: payload})
		n++
	}
	waitWritten(b, r, n, 0)
	elapsed := time.Since(start)
	b.ReportMetric(float64(n)/elapsed.Seconds(), "events/s")
	if d := r.Stats().EventsDropped; d != 0 {
		b.Fatalf("%d events dropped", d)
	}
}

// BenchmarkIngestParallel emits events from 32 goroutines at about
// 50,000 a second in all (each sleeps 640 µs between events), below what
// the writer stores, as a busy worker's tasks do, and reports the
// process's CPU per event, the writer's included. The writer lingering on
// the queue's length rather than receiving each item as it came
// (Recorder.linger) cut the writer's wake-ups and the waiting on the
// intake lock this measures.
func BenchmarkIngestParallel(b *testing.B) {
	cfg := baseConfig(b, b.TempDir(), "", "w1", newClock())
	cfg.Now = time.Now
	r := mustOpen(b, cfg)
	startRun(b, r)
	payload := json.RawMessage(`{"status":"ok","exit_code":0,"duration_ms":12,"output_size_bytes":512}`)
	labels := map[string]string{"customer": "acme", "region": "eu"}
	const goroutines = 32
	var n atomic.Int64
	total := int64(b.N)
	cpu0 := cpuTime()
	b.ResetTimer()
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			for {
				i := n.Add(1)
				if i > total {
					return
				}
				r.Event(event.Event{Type: event.TypeExecutorFinished, TaskID: "task-" + strconv.FormatInt(i/4, 10), Labels: labels, Payload: payload})
				time.Sleep(640 * time.Microsecond)
			}
		})
	}
	wg.Wait()
	waitWritten(b, r, uint64(total), 0)
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(total), "cpu-ns/event")
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
		execSQL(db, `PRAGMA journal_mode=OFF`)
		execSQL(db, `PRAGMA synchronous=OFF`)
		execSQL(db, `BEGIN`)
		for i := range perFile {
			n := f*perFile + i
			if err := execSQL(db, `INSERT INTO events(id, ts_ms, type, kind, task_id, worker, labels, payload) VALUES(?, ?, ?, '', ?, ?, '{}', ?)`,
				n+1, from+int64(i), event.TypeExecutorFinished, "task-"+strconv.Itoa(n%tasks), fmt.Sprintf("w%d", f%5), payload); err != nil {
				b.Fatal(err)
			}
		}
		if err := execSQL(db, `COMMIT`); err != nil {
			b.Fatal(err)
		}
		setMeta(db, "format", "1", "kind", "sealed", "worker", fmt.Sprintf("w%d", f%5), "cluster", "c1",
			"from_ms", strconv.FormatInt(from, 10), "to_ms", strconv.FormatInt(from+60000, 10))
		db.Close()
	}
}

// BenchmarkSuccessfulTask stores what the worker emits for one successful
// 1 KiB task (received, started, finished with a 1 KiB stdout tail, an
// annotation, the task row announcing one delivery, the sink_delivered
// event), with history.task_detail summary and full, and as a Kafka task
// (summary; a row with its partition, offset, key and the key's encoding
// in env). It guards the summary's cost (a task's writer CPU, ns/task) and
// reports the live file's bytes per task after a checkpoint.
func BenchmarkSuccessfulTask(b *testing.B) {
	tail, _ := json.Marshal(strings.Repeat("x", 1024))
	fin := json.RawMessage(`{"attempt":1,"status":"ok","exit_code":0,"duration_ms":3,"output_size_bytes":1024,"stdout_tail":` + string(tail) + `}`)
	kafkaEnv := map[string]string{"SVC_KEY_ENCODING": "utf-8"} // as the worker shares it between rows
	for _, name := range []string{"summary", "full", "kafka"} {
		full, kafka := name == "full", name == "kafka"
		b.Run(name, func(b *testing.B) {
			clk := newClock()
			cfg := baseConfig(b, b.TempDir(), "", "w1", clk)
			cfg.Now, cfg.FullDetail, cfg.BufferSize = time.Now, full, 4096
			// The worker encodes an ok attempt's stdout tail only for
			// history.task_detail = "full" (model.Events.KeepOKTail).
			finPayload := fin
			if !full {
				finPayload = json.RawMessage(`{"attempt":1,"status":"ok","exit_code":0,"duration_ms":3,"output_size_bytes":1024}`)
			}
			r := mustOpen(b, cfg)
			startRun(b, r)
			var n uint64
			cpu0 := processCPU()
			for b.Loop() {
				for r.queued.Load() > int64(r.cfg.BufferSize-8) {
					time.Sleep(100 * time.Microsecond) // not a spin: the CPU figure is the writer's
				}
				id := "task-" + strconv.FormatUint(n, 10)
				// As the worker emits them: its own payloads are marked valid
				// (model.Events), an executor's annotation is checked.
				received := json.RawMessage(`{"source":"http","input_size_bytes":1024}`)
				if kafka { // the row below reproduces it, so it folds
					received = json.RawMessage(fmt.Sprintf(`{"source":"kafka","alias":"source","partition":%d,"offset":%d,"key":"key-%d","key_encoding":"utf-8","input_size_bytes":1024}`, n%6, n, n%1000))
				}
				r.Event(event.Event{Type: event.TypeTaskReceived, TaskID: id, Payload: received, PayloadValid: true})
				r.Event(event.Event{Type: event.TypeExecutorStarted, TaskID: id, Payload: json.RawMessage(`{"attempt":1}`), PayloadValid: true})
				r.Event(event.Event{Type: event.TypeExecutorFinished, TaskID: id, Payload: finPayload, PayloadValid: true})
				r.Event(event.Event{Type: event.TypeAnnotation, Kind: "echo.size", TaskID: id, Payload: json.RawMessage(`{"attempt":1,"bytes":1024}`)})
				row := event.TaskRow{TaskID: id, Source: "http", Status: "ok", Attempts: 1, DurationMs: 3, OutputSizeBytes: 1024, Partition: -1, Offset: -1, Deliveries: 1}
				if kafka {
					row.Source, row.Alias, row.Partition, row.Offset = "kafka", "source", int32(n%6), int64(n)
					row.Key, row.KeyEncoding, row.Env = "key-"+strconv.FormatUint(n%1000, 10), "utf-8", kafkaEnv
				}
				r.Task(row)
				r.Event(event.Event{Type: event.TypeSinkDelivered, TaskID: id, Payload: json.RawMessage(`{"output_size_bytes":1024,"sink":"out"}`), PayloadValid: true})
				n++
			}
			waitWritten(b, r, 5*n, n)
			b.StopTimer()
			b.ReportMetric(float64((processCPU()-cpu0).Nanoseconds())/float64(n), "cpu-ns/task")
			if s := r.Stats(); s.EventsDropped+s.TasksDropped != 0 {
				b.Fatalf("dropped: %+v", s)
			}
			var size int64
			r.withLive(b.Context(), func(db *sqlite.Conn) error {
				execSQL(db, `PRAGMA wal_checkpoint(TRUNCATE)`)
				return scan(db, `SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()`, []any{&size})
			})
			if n >= 1000 {
				b.ReportMetric(float64(size)/float64(n), "disk-B/task")
			}
		})
	}
}

// processCPU is this process's user+system CPU time so far: benchmarks
// report it per task, which holds on a loaded machine where ns/op does not.
func processCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
