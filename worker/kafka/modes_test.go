package kafka

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"svc/worker"
	"svc/worker/config"
	"svc/worker/demo"
	"svc/worker/event"
	"svc/worker/model"
	"svc/worker/sink"
	"svc/worker/workertest"
)

// The test binary doubles as the sample executor (`svc exec-demo`), which
// speaks both protocols: one process per message, or protocol v2 frames
// when started with SVC_EXECUTOR_MODE=persistent.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "exec-demo" {
		os.Exit(demo.Execute(os.Stdin, os.Stdout, os.Stderr, os.NewFile(3, "events")))
	}
	if len(os.Args) > 1 && os.Args[1] == "exec-demo-stray" {
		os.Exit(execDemoStray())
	}
	workertest.ShortParallel(8)
	os.Exit(m.Run())
}

// modeRecorder keeps the flight-recorder events and task rows of a worker.
type modeRecorder struct {
	mu     sync.Mutex
	events []event.Event
	tasks  map[string]event.TaskRow
}

func (c *modeRecorder) Event(e event.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.events = append(c.events, e)
}

func (c *modeRecorder) Task(r event.TaskRow) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tasks[r.TaskID] = r
}
func (c *modeRecorder) State(string, map[string]any)   {}
func (c *modeRecorder) ConfigSnapshot(json.RawMessage) {}

func (c *modeRecorder) count(typ string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, e := range c.events {
		if e.Type == typ {
			n++
		}
	}
	return n
}

// TestPipelineInBothModes runs the same messages through the same
// pipeline with the sample executor spawned per message and kept running
// in a persistent pool, and checks the same outcome in both: ok results
// in the sink as the executor's output with the source key, per-key
// source order kept, one retry for a temporary failure, failures in the
// DLQ after every attempt with their reason, the same recorder events and
// task rows, the same metrics, and probes with output, stderr,
// annotations and cache writes.
func TestPipelineInBothModes(t *testing.T) {
	t.Parallel()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	reasons := map[string]string{
		"spawn":      "executor exited with code 1",
		"persistent": "executor answered status failed: exec-demo: the message asked to fail",
	}
	for _, mode := range []string{"spawn", "persistent"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			c := ktCluster(t, 3)
			addrs := c.ListenAddrs()
			cfg := ktConfig(t, addrs, self)
			cfg.Executor.Args = []string{"exec-demo"}
			cfg.Executor.Mode = mode
			cfg.Executor.PoolSize = 4
			checkModePipeline(t, cfg, reasons[mode])
		})
	}
}

// checkModePipeline is TestPipelineInBothModes for one executor mode.
func checkModePipeline(t *testing.T, cfg *config.Config, failReason string) {
	addrs := cfg.Sources.Kafka.Brokers
	w := ktNew(t, cfg)
	rec := &modeRecorder{tasks: map[string]event.TaskRow{}}
	w.Events.Attach(rec)
	w.Start()

	// 70 messages on 7 keys; every 5th fails, every 7th other one asks
	// for a retry first. seq is the message's place within its key. Few:
	// a race-enabled test binary takes about a second to start.
	n, keys := 70, 7
	if testing.Short() {
		n = 14 // spawn mode starts the (large) test binary per attempt
	}
	kinds := map[int]string{}
	var recs []*kgo.Record
	for i := range n {
		kind := "plain"
		switch {
		case i%5 == 0:
			kind = "fail"
		case i%7 == 0:
			kind = "tempfail"
		}
		kinds[i] = kind
		recs = append(recs, &kgo.Record{Topic: ktIn, Key: fmt.Appendf(nil, "k%d", i%keys),
			Value: fmt.Appendf(nil, "id=%d seq=%03d %s", i, i/keys, kind)})
	}
	want := map[string]int{}
	for _, k := range kinds {
		want[k]++
	}
	ktProduce(t, ktClient(t, addrs), recs)
	ktWaitCommitted(t, ktAdmin(t, addrs), cfg.Sources.Kafka.Group)
	w.WaitSettled()

	// The sink: one record per ok message (at-least-once may repeat one),
	// the executor's JSON answer keyed as the source, in key order.
	type answer struct {
		TaskID string `json:"task_id"`
		Source string `json:"source"`
		Upper  string `json:"upper"`
	}
	seen := map[int]bool{}
	lastSeq := map[string]string{}
	for _, r := range ktReadAll(t, addrs, ktOut) {
		var a answer
		if err := json.Unmarshal(r.Value, &a); err != nil {
			t.Errorf("sink value %q is not the executor's JSON answer: %v", r.Value, err)
			continue
		}
		var id int
		var seq, kind string
		if _, err := fmt.Sscanf(strings.ToLower(a.Upper), "id=%d seq=%s %s", &id, &seq, &kind); err != nil {
			t.Errorf("sink answer %q: %v", a.Upper, err)
			continue
		}
		if kinds[id] == "fail" {
			t.Errorf("failing message %d reached the sink", id)
		}
		if a.Source != model.SourceKafka || string(r.Key) != fmt.Sprintf("k%d", id%keys) {
			t.Errorf("sink record of %d: source %q key %q, want kafka and k%d", id, a.Source, r.Key, id%keys)
		}
		if tid, _ := ktHeader(r, sink.HeaderTaskID); tid != a.TaskID {
			t.Errorf("sink record of %d: %s header %q, executor saw task %q", id, sink.HeaderTaskID, tid, a.TaskID)
		}
		if seq < lastSeq[string(r.Key)] {
			t.Errorf("key %s: seq %s reached the sink after seq %s", r.Key, seq, lastSeq[string(r.Key)])
		}
		lastSeq[string(r.Key)] = seq
		seen[id] = true
	}
	if got := len(seen); got != want["plain"]+want["tempfail"] {
		t.Errorf("%d distinct messages in the sink, want %d", got, want["plain"]+want["tempfail"])
	}

	// The DLQ: every failing message, after every attempt, with its reason.
	dlq := map[int]bool{}
	for _, r := range ktReadAll(t, addrs, ktDLQ) {
		id := ktID(r.Value)
		dlq[id] = true
		if kinds[id] != "fail" {
			t.Errorf("message %d (%s) reached the DLQ", id, kinds[id])
		}
		if got, _ := ktHeader(r, sink.HeaderDLQAttempts); got != "2" {
			t.Errorf("DLQ record of %d: %s = %q, want 2", id, sink.HeaderDLQAttempts, got)
		}
		if got, _ := ktHeader(r, sink.HeaderDLQReason); got != failReason {
			t.Errorf("DLQ record of %d: %s = %q, want %q", id, sink.HeaderDLQReason, got, failReason)
		}
	}
	if len(dlq) != want["fail"] {
		t.Errorf("%d distinct messages in the DLQ, want %d", len(dlq), want["fail"])
	}

	// Metrics and recorder: attempts are 1 for plain, 2 for the others.
	attempts := float64(want["plain"] + 2*want["tempfail"] + 2*want["fail"])
	for _, m := range []struct {
		name  string
		label []string
		want  float64
	}{
		{"svc_tasks_total", []string{"status", "ok"}, float64(want["plain"] + want["tempfail"])},
		{"svc_tasks_total", []string{"status", "failed"}, float64(want["fail"])},
		{"svc_executor_attempts_total", nil, attempts},
	} {
		if got := w.Metric(m.name, m.label...); got < m.want {
			t.Errorf("%s%v = %v, want at least %v", m.name, m.label, got, m.want)
		}
	}
	for typ, min := range map[string]int{
		event.TypeTaskReceived:     n,
		event.TypeExecutorStarted:  int(attempts),
		event.TypeExecutorFinished: int(attempts),
		event.TypeAnnotation:       n, // the sample annotates every task, failed ones too
		event.TypeSinkDelivered:    want["plain"] + want["tempfail"],
		event.TypeDLQSent:          want["fail"],
	} {
		if got := rec.count(typ); got < min {
			t.Errorf("%d %s events, want at least %d", got, typ, min)
		}
	}
	rec.mu.Lock()
	rows := map[string][]int{} // kind → attempts of each row
	for _, r := range rec.tasks {
		kind := "plain"
		switch {
		case r.Status == model.StatusFailed:
			kind = "fail"
		case r.Attempts == 2:
			kind = "tempfail"
		}
		rows[kind] = append(rows[kind], r.Attempts)
		if r.Partition < 0 || r.Offset < 0 || r.Key == "" {
			t.Errorf("task row %s has no Kafka place: partition %d offset %d key %q", r.TaskID, r.Partition, r.Offset, r.Key)
		}
	}
	rec.mu.Unlock()
	for kind, k := range want {
		if len(rows[kind]) < k {
			t.Errorf("%d %s task rows, want at least %d (rows by kind: %v)", len(rows[kind]), kind, k, rows)
		}
	}

	// Probes: the same answer, stderr, annotation and cache write in both
	// modes, and the retry and failure rules of the pipeline.
	for _, p := range []struct {
		value, status string
		attempts      int
		stderr        string
	}{
		{"probe plain", model.StatusOK, 1, ""},
		{"probe tempfail", model.StatusOK, 2, ""}, // stderr of the last attempt
		{"probe fail", model.StatusFailed, 2, "the message asked to fail"},
	} {
		res, err := w.App.Probe(t.Context(), worker.ProbeRequest{Value: []byte(p.value)})
		if err != nil || len(res) != 1 {
			t.Fatalf("Probe(%q) = %d results, %v", p.value, len(res), err)
		}
		r := res[0]
		if r.Status != p.status || r.Attempts != p.attempts || !strings.Contains(string(r.Stderr), p.stderr) {
			t.Errorf("Probe(%q) = status %s after %d attempts, stderr %q; want %s after %d, stderr with %q",
				p.value, r.Status, r.Attempts, r.Stderr, p.status, p.attempts, p.stderr)
		}
		if p.status == model.StatusOK && !strings.Contains(string(r.Output), strings.ToUpper(p.value)) {
			t.Errorf("Probe(%q) output = %q, want the executor's answer", p.value, r.Output)
		}
		if len(r.Annotations) != 1 || r.Annotations[0].Kind != "demo.summary" {
			t.Errorf("Probe(%q) annotations = %+v, want one demo.summary", p.value, r.Annotations)
		}
		wantCache := []model.CacheWrite{{Key: "demo.last_task", Value: r.Task.ID, Scope: "cluster"}}
		if !slices.Equal(r.CacheWrites, wantCache) {
			t.Errorf("Probe(%q) cache writes = %+v, want %+v", p.value, r.CacheWrites, wantCache)
		}
	}
}
