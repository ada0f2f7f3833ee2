package recorder

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"svc/worker/event"
)

var foldTasks = flag.Int("fold.tasks", 50000, "BenchmarkFold: tasks in each sealed file folded (about 2.6 KB each)")

// cpuTime is the CPU time (user and system) this process used so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// words make executor outputs that compress about as well as real ones.
var words = strings.Fields("order customer region eu us apac item price qty total ok status shipped pending " +
	"warehouse sku discount currency eur usd invoice line note priority express standard")

// recordTasks writes n tasks the way the worker does (task_received,
// executor_started, executor_finished with a stdout tail, sink_delivered,
// and the task row with labels and env) through r's public API, task ids
// prefix-0 ... prefix-(n-1), and waits until they are stored.
func recordTasks(tb testing.TB, r *Recorder, prefix string, n int) {
	tb.Helper()
	rng := rand.New(rand.NewPCG(uint64(len(prefix)), 7))
	before := r.Stats()
	for i := range n {
		id := fmt.Sprintf("%s-%d", prefix, i)
		labels := map[string]string{"customer": words[rng.IntN(6)] + "-" + fmt.Sprint(rng.IntN(50)), "region": words[3+rng.IntN(3)], "batch": prefix}
		var out strings.Builder
		fmt.Fprintf(&out, `{"id":%q,"score":%.4f,"lines":[`, id, rng.Float64())
		for j := range 12 {
			if j > 0 {
				out.WriteByte(',')
			}
			fmt.Fprintf(&out, `{"sku":"%s-%d","qty":%d,"price":%.2f,"note":"%s %s"}`, words[rng.IntN(len(words))],
				rng.IntN(1000), rng.IntN(20), rng.Float64()*100, words[rng.IntN(len(words))], words[rng.IntN(len(words))])
		}
		out.WriteString(`]}`)
		for r.queued.Load() > int64(r.cfg.BufferSize-8) {
			runtime.Gosched()
		}
		p, _ := json.Marshal(map[string]any{"source": "kafka", "alias": "source", "partition": i % 6, "offset": i,
			"key": fmt.Sprintf("key-%d", i), "key_encoding": "utf-8", "input_size_bytes": 1024})
		r.Event(event.Event{Type: event.TypeTaskReceived, TaskID: id, Labels: labels, Payload: p})
		r.Event(event.Event{Type: event.TypeExecutorStarted, TaskID: id, Labels: labels, Payload: json.RawMessage(`{"attempt":1}`)})
		p, _ = json.Marshal(map[string]any{"attempt": 1, "status": "ok", "exit_code": 0, "duration_ms": rng.IntN(40),
			"output_size_bytes": out.Len(), "stdout_tail": out.String()})
		r.Event(event.Event{Type: event.TypeExecutorFinished, TaskID: id, Labels: labels, Payload: p})
		r.Event(event.Event{Type: event.TypeSinkDelivered, TaskID: id, Labels: labels, Payload: json.RawMessage(`{"sink":"out","output_size_bytes":` + fmt.Sprint(out.Len()) + `}`)})
		r.Task(event.TaskRow{TaskID: id, Source: "kafka", Alias: "source", Partition: int32(i % 6), Offset: int64(i),
			Key: fmt.Sprintf("key-%d", i), Labels: labels, Status: "ok", Attempts: 1, DurationMs: int64(rng.IntN(40)),
			OutputSizeBytes: int64(out.Len()), KeyEncoding: "utf-8", Env: map[string]string{"SVC_KEY_ENCODING": "utf-8"}})
	}
	waitWritten(tb, r, before.EventsWritten+uint64(4*n), before.TasksWritten+uint64(n))
}

// sealedFixture writes one sealed file of n tasks into history/c1/ of a new
// folder, by a worker whose clock reads start, and returns the folder.
func sealedFixture(tb testing.TB, worker string, start time.Time, n int) string {
	tb.Helper()
	shared := tb.TempDir()
	sealedInto(tb, shared, worker, start, n)
	return shared
}

// sealedInto writes one sealed file of n tasks (ids and label batch
// <worker>-...) into history/c1/ of shared, by a worker whose clock reads
// start.
func sealedInto(tb testing.TB, shared, worker string, start time.Time, n int) {
	tb.Helper()
	clk := &clock{}
	clk.ms.Store(start.UnixMilli())
	cfg := baseConfig(tb, tb.TempDir(), shared, worker, clk)
	cfg.BufferSize, cfg.LiveMaxBytes = 65536, 1<<40 // one file, however large
	r := mustOpen(tb, cfg)
	stop := startRun(tb, r)
	recordTasks(tb, r, worker, n)
	clk.add(time.Minute)
	if err := stop(); err != nil { // seals
		tb.Fatal(err)
	}
}

// copyFolder copies the regular files of src into dst (created 0700).
func copyFolder(tb testing.TB, src, dst string) {
	tb.Helper()
	os.MkdirAll(dst, 0o700)
	entries, err := os.ReadDir(src)
	if err != nil {
		tb.Fatal(err)
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		in, err := os.Open(filepath.Join(src, e.Name()))
		if err != nil {
			tb.Fatal(err)
		}
		out, err := os.OpenFile(filepath.Join(dst, e.Name()), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if err == nil {
			_, err = io.Copy(out, in)
			out.Close()
		}
		in.Close()
		if err != nil {
			tb.Fatal(err)
		}
	}
}

// BenchmarkFold measures what archiving costs: each iteration folds one
// sealed file of -fold.tasks tasks (written through Event and Task like a
// busy worker's, about 2.6 KB a task) into a new window archive, as the
// archive-lock holder does. It reports the CPU the process used (user and
// system, GC included) per GB of sealed file and per 100,000 tasks, and the
// compression ratio.
func BenchmarkFold(b *testing.B) {
	start := time.UnixMilli(t0)
	fixture := filepath.Join(sealedFixture(b, "w1", start, *foldTasks), "history", "c1")
	sealed, _ := filepath.Glob(filepath.Join(fixture, "w1-*.db"))
	if len(sealed) != 1 {
		b.Fatalf("fixture holds %v, want one sealed file", sealed)
	}
	raw := mustStat(b, sealed[0]).Size()
	b.Logf("sealed file: %d tasks, %.1f MB, %.0f bytes a task", *foldTasks, float64(raw)/1e6, float64(raw)/float64(*foldTasks))
	clk := &clock{}
	clk.ms.Store(start.Add(24 * time.Hour).UnixMilli())
	var cpu time.Duration
	var archived int64
	for b.Loop() {
		b.StopTimer()
		shared := b.TempDir()
		copyFolder(b, fixture, filepath.Join(shared, "history", "c1"))
		cfg := baseConfig(b, "", shared, "holder", clk)
		cfg.ArchiveEnabled = true
		r := mustOpen(b, cfg)
		b.StartTimer()
		c := cpuTime()
		if err := r.archivePass(context.Background()); err != nil {
			b.Fatal(err)
		}
		cpu += cpuTime() - c
		b.StopTimer()
		archives, _ := filepath.Glob(filepath.Join(shared, "history", "c1", "*.db.gz"))
		if left, _ := filepath.Glob(filepath.Join(shared, "history", "c1", "*.db")); len(left) != 0 || len(archives) == 0 {
			b.Fatalf("after the pass: sealed %v, archives %v", left, archives)
		}
		archived = 0
		for _, a := range archives {
			archived += mustStat(b, a).Size()
		}
		r.Close()
		os.RemoveAll(shared)
		b.StartTimer()
	}
	perFold := cpu.Seconds() / float64(b.N)
	b.ReportMetric(perFold/(float64(raw)/1e9), "cpu-s/GB")
	b.ReportMetric(perFold/(float64(*foldTasks)/1e5), "cpu-s/100k-tasks")
	b.ReportMetric(float64(raw)/float64(archived), "ratio")
}
