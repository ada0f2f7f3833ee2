package recorder

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"svc/worker/event"
)

func TestOpenValidates(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
	}{
		{"empty worker", Config{Cluster: "c"}},
		{"worker with slash", Config{Worker: "a/b", Cluster: "c"}},
		{"dot worker", Config{Worker: "..", Cluster: "c"}},
		{"empty cluster", Config{Worker: "w"}},
		{"negative seal", Config{Worker: "w", Cluster: "c", SealInterval: -1}},
		{"negative buffer", Config{Worker: "w", Cluster: "c", BufferSize: -1}},
		{"huge buffer", Config{Worker: "w", Cluster: "c", BufferSize: 1 << 40}},
		{"huge ring", Config{Worker: "w", Cluster: "c", MemoryEvents: 1 << 40}},
		{"sub-millisecond window", Config{Worker: "w", Cluster: "c", ArchiveWindow: time.Nanosecond}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if r, err := Open(t.Context(), tt.cfg); err == nil {
				r.Close()
				t.Fatalf("Open(%+v) = nil error, want error", tt.cfg)
			}
		})
	}
}

func TestMemoryMode(t *testing.T) {
	clk := newClock()
	r := mustOpen(t, Config{Worker: "w", Cluster: "c1", MemoryEvents: 50, Now: clk.now})
	stop := startRun(t, r)
	for i := range 120 {
		typ := event.TypeTaskReceived
		if i%2 == 1 {
			typ = event.TypeExecutorFinished
		}
		r.Event(event.Event{Type: typ, TaskID: "t" + string(rune('a'+i%3))})
		r.Task(event.TaskRow{TaskID: "t", Source: []string{"kafka", "http"}[i%2], Status: "ok",
			Labels: map[string]string{"n": string(rune('a' + i%3))}})
	}
	evs, err := r.Events(t.Context(), EventQuery{Limit: 1000})
	if err != nil {
		t.Fatalf("Events() error = %v", err)
	}
	if len(evs) != 50 {
		t.Fatalf("len(Events()) = %d, want 50 (ring size)", len(evs))
	}
	if !slices.IsSortedFunc(evs, func(a, b event.Event) int { return int(b.ID - a.ID) }) {
		t.Errorf("Events() not newest first")
	}
	evs, _ = r.Events(t.Context(), EventQuery{Types: []string{event.TypeExecutorFinished}, Limit: 10, BeforeID: evs[0].ID})
	for _, e := range evs {
		if e.Type != event.TypeExecutorFinished {
			t.Errorf("Events(types filter) returned type %q", e.Type)
		}
	}
	if len(evs) != 10 {
		t.Errorf("len(Events(limit 10)) = %d, want 10", len(evs))
	}
	tasks, _ := r.TaskResults(t.Context(), 5)
	if len(tasks) != 5 {
		t.Errorf("len(TaskResults(5)) = %d, want 5", len(tasks))
	}
	c, _ := r.Counts(t.Context())
	if c.Total != 120 || c.BySource["kafka"]["ok"] != 60 || c.BySource["http"]["ok"] != 60 {
		t.Errorf("Counts() = %+v, want 60 kafka ok and 60 http ok", c)
	}
	tr, _ := r.Trace(t.Context(), "ta")
	if len(tr) == 0 || tr[0].TaskID != "ta" {
		t.Errorf("Trace(ta) = %d events, want events of ta from the ring", len(tr))
	}
	byLabel, _ := r.TraceByLabel(t.Context(), "n", "b", 1000)
	if len(byLabel) == 0 || byLabel[0].Labels["n"] != "b" {
		t.Errorf("TraceByLabel(n=b) = %v, want rows with n=b", byLabel)
	}
	if err := r.SnapshotLive(t.Context(), &bytes.Buffer{}); !errors.Is(err, ErrNoLiveFile) {
		t.Errorf("SnapshotLive() error = %v, want ErrNoLiveFile", err)
	}
	if dbs, err := r.Databases(t.Context()); err != nil || len(dbs) != 0 {
		t.Errorf("Databases() = %v, %v, want none", dbs, err)
	}
	if _, err := r.Merge(t.Context(), []string{"merged/x.db"}); !errors.Is(err, ErrNoSharedDir) {
		t.Errorf("Merge() error = %v, want ErrNoSharedDir", err)
	}
	if err := stop(); err != nil {
		t.Errorf("Run() = %v, want nil", err)
	}
}

func TestEventsAndTasksOnDisk(t *testing.T) {
	clk := newClock()
	dir := t.TempDir()
	r := mustOpen(t, baseConfig(t, dir, "", "w1", clk))
	startRun(t, r)
	r.ConfigSnapshot(json.RawMessage(`{"ui":{"auth_token":"***"}}`))
	r.State("running", map[string]any{"reason": "test"})
	for i := range 30 {
		clk.tick()
		r.Event(event.Event{Type: event.TypeAnnotation, Kind: "note", TaskID: "t1", Labels: map[string]string{"i": "x"},
			Payload: json.RawMessage(`{"i":` + string(rune('0'+i%10)) + `}`)})
	}
	r.Event(event.Event{Type: event.TypeAnnotation, Payload: json.RawMessage(`not json`)})
	r.Task(event.TaskRow{TaskID: "t1", Source: "kafka", Status: "failed", Partition: 3, Offset: 42,
		Labels: map[string]string{"customer": "acme"},
		Env:    map[string]string{"DB_PASSWORD": "hunter2", "API_Key": "k", "aws_credentials": "c", "HOME": "/root", "auth_TOKEN": "t"}})
	waitWritten(t, r, 33, 1)

	evs, err := r.Events(t.Context(), EventQuery{Types: []string{event.TypeAnnotation}, TaskID: "t1", Limit: 5})
	if err != nil || len(evs) != 5 {
		t.Fatalf("Events() = %d events, %v; want 5", len(evs), err)
	}
	if evs[0].ID <= evs[1].ID || evs[0].Kind != "note" || evs[0].Labels["i"] != "x" || evs[0].Worker != "w1" {
		t.Errorf("Events()[0] = %+v, want newest annotation of w1", evs[0])
	}
	older, _ := r.Events(t.Context(), EventQuery{BeforeID: evs[4].ID, Limit: 1000})
	if len(older) != 27 { // 25 older annotations, state, config_snapshot
		t.Errorf("Events(before %d) = %d events, want 27", evs[4].ID, len(older))
	}
	all, _ := r.Events(t.Context(), EventQuery{Limit: 1})
	if string(all[0].Payload) != `"not json"` {
		t.Errorf("invalid payload stored as %s, want a JSON string", all[0].Payload)
	}
	tasks, _ := r.TaskResults(t.Context(), 0)
	if len(tasks) != 1 {
		t.Fatalf("TaskResults() = %d rows, want 1", len(tasks))
	}
	want := map[string]string{"DB_PASSWORD": "***", "API_Key": "***", "aws_credentials": "***", "HOME": "/root", "auth_TOKEN": "***"}
	for k, v := range want {
		if tasks[0].Env[k] != v {
			t.Errorf("stored env %s = %q, want %q", k, tasks[0].Env[k], v)
		}
	}
	if tasks[0].Partition != 3 || tasks[0].Offset != 42 || tasks[0].Labels["customer"] != "acme" {
		t.Errorf("TaskResults()[0] = %+v", tasks[0])
	}
	// The secret never reaches the file, even in the WAL.
	for _, suffix := range []string{"", "-wal"} {
		data, _ := os.ReadFile(r.live.path + suffix)
		if bytes.Contains(data, []byte("hunter2")) {
			t.Errorf("live file%s contains the unmasked secret", suffix)
		}
	}
	var snap bytes.Buffer
	if err := r.SnapshotLive(t.Context(), &snap); err != nil {
		t.Fatalf("SnapshotLive() error = %v", err)
	}
	path := filepath.Join(t.TempDir(), "snap.db")
	os.WriteFile(path, snap.Bytes(), 0o600)
	db, err := openReadOnly(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var nEvents, nConfig, nState int
	scan(db, `SELECT (SELECT count(*) FROM events), (SELECT count(*) FROM config_snapshots), (SELECT count(*) FROM state_timeline)`,
		[]any{&nEvents, &nConfig, &nState})
	if nEvents != 33 || nConfig != 1 || nState != 1 {
		t.Errorf("snapshot has %d events, %d config snapshots, %d states; want 33, 1, 1", nEvents, nConfig, nState)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "recorder", ".snapshot*")); len(left) != 0 {
		t.Errorf("snapshot temp files left: %v", left)
	}
}

func TestEventsContinueIntoSealedFiles(t *testing.T) {
	clk := newClock()
	r := mustOpen(t, baseConfig(t, t.TempDir(), t.TempDir(), "w1", clk))
	startRun(t, r)
	for range 10 {
		r.Event(event.Event{Type: event.TypeTaskReceived})
	}
	waitWritten(t, r, 10, 0)
	clk.add(time.Minute)
	seal(t, r)
	for range 5 {
		r.Event(event.Event{Type: event.TypeTaskReceived})
	}
	waitWritten(t, r, 15, 0)
	evs, err := r.Events(t.Context(), EventQuery{Limit: 12})
	if err != nil || len(evs) != 12 {
		t.Fatalf("Events(limit 12) = %d, %v; want 12 spanning live and sealed", len(evs), err)
	}
	for i := 1; i < len(evs); i++ {
		if evs[i].ID >= evs[i-1].ID {
			t.Fatalf("Events() ids not strictly decreasing at %d: %d then %d", i, evs[i-1].ID, evs[i].ID)
		}
	}
}

func TestFullBufferDropsWithoutBlocking(t *testing.T) {
	clk := newClock()
	cfg := baseConfig(t, t.TempDir(), "", "w1", clk)
	cfg.BufferSize = 64
	r := mustOpen(t, cfg)
	startRun(t, r)
	// Block the writer: another connection holds the write lock.
	blocker := openTestConn(t, r.live.path)
	defer blocker.Close()
	if err := execSQL(blocker, `BEGIN IMMEDIATE`); err != nil {
		t.Fatalf("BEGIN IMMEDIATE error = %v", err)
	}
	r.Event(event.Event{Type: event.TypeTaskReceived}) // the writer takes it, lingers for more, then blocks
	waitStats(t, r, "writer to dequeue", func(s Stats) bool { return s.Queued == 0 })
	time.Sleep(2 * writeLinger)
	const n = 100000
	for range n {
		r.Event(event.Event{Type: event.TypeTaskReceived})
		r.Task(event.TaskRow{TaskID: "t", Status: "ok"})
	}
	s := r.Stats()
	// At most the queue (64) plus one lingering batch (maxBatch) got in;
	// the overflow list took what fits in its 32 MiB, the rest is dropped.
	if s.EventsDropped+s.TasksDropped+s.Overflowed < 2*n-64-maxBatch || s.TasksDropped == 0 ||
		s.Overflowed > overflowMaxBytes/itemOverhead {
		t.Errorf("Stats() = %+v, want at least %d items dropped or overflowed (at most %d), some tasks dropped", s, 2*n-64-maxBatch, overflowMaxBytes/itemOverhead)
	}
	execSQL(blocker, `ROLLBACK`)
	waitStats(t, r, "queue drained", func(s Stats) bool { return s.Queued == 0 })
	waitStats(t, r, "all accounted", func(s Stats) bool {
		return s.EventsWritten+s.EventsDropped == n+1 && s.TasksWritten+s.TasksDropped == n
	})
}

func TestSlowSubscriberNeverBlocks(t *testing.T) {
	r := mustOpen(t, Config{Worker: "w", Cluster: "c"})
	slow := r.Subscribe(1)
	fast := r.Subscribe(2000)
	for range 1000 { // annotations: never sampled (routine items are, see TestWSSamplesRoutineItems)
		r.Event(event.Event{Type: event.TypeAnnotation, Kind: "k"})
	}
	r.Task(event.TaskRow{TaskID: "x"})
	if got := slow.Dropped(); got != 999 {
		t.Errorf("slow.Dropped() = %d, want 999", got)
	}
	if got := fast.Dropped(); got != 0 {
		t.Errorf("fast.Dropped() = %d, want 0", got)
	}
	if s := r.Stats(); s.Subscribers != 2 || s.SubscriberDrops != 999 {
		t.Errorf("Stats() subscribers %d drops %d, want 2 and 999", s.Subscribers, s.SubscriberDrops)
	}
	for _, sub := range []*Subscription{slow, fast} {
		select {
		case <-sub.Ready():
		default:
			t.Errorf("Ready() not signalled with items queued")
		}
	}
	slowEvents, slowTasks, ok := slow.Take(nil, nil)
	if !ok || len(slowEvents) != 1 || len(slowTasks) != 1 {
		t.Fatalf("slow.Take() = %d events, %d tasks, %v; want 1, 1, true", len(slowEvents), len(slowTasks), ok)
	}
	fastEvents, fastTasks, _ := fast.Take(nil, nil)
	if len(fastEvents) != 1000 || fastEvents[0].ID != slowEvents[0].ID || fastEvents[999].ID <= fastEvents[0].ID {
		t.Errorf("fast.Take() = %d events, want 1000 in ID order starting where slow's one is", len(fastEvents))
	}
	if len(fastTasks) != 1 || fastTasks[0].TaskID != "x" {
		t.Errorf("fast.Take() tasks = %+v, want task x", fastTasks)
	}
	if ev, ts, _ := fast.Take(fastEvents[:0], fastTasks[:0]); len(ev)+len(ts) != 0 {
		t.Errorf("second Take() = %d events, %d tasks, want an empty queue", len(ev), len(ts))
	}
	slow.Close()
	slow.Close()
	if _, open := <-slow.Ready(); open {
		t.Errorf("Ready() open after Close")
	}
	if _, _, ok := slow.Take(nil, nil); ok {
		t.Errorf("Take() ok after Close")
	}
	r.Event(event.Event{Type: event.TypeTaskReceived}) // no panic on a closed subscriber
	if s := r.Stats(); s.Subscribers != 1 {
		t.Errorf("Stats().Subscribers = %d after Close, want 1", s.Subscribers)
	}
}

func TestCloseWithoutRunSeals(t *testing.T) {
	clk := newClock()
	dir, shared := t.TempDir(), t.TempDir()
	r, err := Open(context.Background(), baseConfig(t, dir, shared, "w1", clk))
	if err != nil {
		t.Fatal(err)
	}
	r.Event(event.Event{Type: event.TypeTaskReceived, TaskID: "t"})
	if err := r.Close(); err != nil {
		t.Fatalf("Close() error = %v", err)
	}
	sealed, _ := filepath.Glob(filepath.Join(shared, "history", "c1", "w1-*.db"))
	live, _ := filepath.Glob(filepath.Join(dir, "recorder", "*"))
	if len(sealed) != 1 || len(live) != 0 {
		t.Errorf("after Close: sealed %v, live %v; want one sealed file and an empty live folder", sealed, live)
	}
	// An empty live file is deleted, not sealed.
	r2, _ := Open(context.Background(), baseConfig(t, dir, shared, "w1", clk))
	r2.Close()
	sealed, _ = filepath.Glob(filepath.Join(shared, "history", "c1", "w1-*.db"))
	live, _ = filepath.Glob(filepath.Join(dir, "recorder", "*"))
	if len(sealed) != 1 || len(live) != 0 {
		t.Errorf("after empty run: sealed %v, live %v; want still one sealed file", sealed, live)
	}
}

// TestTaskRowJSON: a row says how its key is written, null when the message
// had none, and always carries env.
func TestTaskRowJSON(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		row  event.TaskRow
		want []string
	}{
		{event.TaskRow{TaskID: "a"}, []string{`"key":null`, `"key_encoding":null`, `"env":{}`}},
		{event.TaskRow{TaskID: "b", Key: "", KeyEncoding: "utf-8"}, []string{`"key":""`, `"key_encoding":"utf-8"`}},
		{event.TaskRow{TaskID: "c", Key: "/wAB", KeyEncoding: "base64"}, []string{`"key":"/wAB"`, `"key_encoding":"base64"`}},
	} {
		b, err := json.Marshal(c.row)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range c.want {
			if !strings.Contains(string(b), w) {
				t.Errorf("json(%s) = %s, lacks %s", c.row.TaskID, b, w)
			}
		}
		if strings.Count(string(b), `"key":`) != 1 || strings.Count(string(b), `"env":`) != 1 {
			t.Errorf("json(%s) = %s: key or env twice", c.row.TaskID, b)
		}
	}
}
