package httpd

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/websocket"

	"svc/worker/event"
)

// floodStack runs the worker `svc run` builds with the demo executor in
// persistent mode (the test binary, see TestMain): one annotation per
// attempt, a failure for a message containing "fail", retried up to
// handler.max_attempts.
func floodStack(t testing.TB) *stack {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t, self)
	cfg.Executor.Args = []string{"exec-demo"}
	cfg.Executor.Mode = "persistent"
	cfg.Sources.HTTP.MaxConcurrent = 256
	return startStack(t, cfg)
}

// wsTally is what one Live page saw of a flood.
type wsTally struct {
	rows          map[string]event.TaskRow
	events        map[string][]event.Event // by task id
	sampledTasks  int
	sampledEvents int
	sentTasks     int // routine task rows sent, as the sampled frames say
	dropped       int
	sampledFrames int
}

func (w *wsTally) take(t *testing.T, f testFrame) {
	t.Helper()
	switch f.Stream {
	case "tasks":
		var row event.TaskRow
		if err := json.Unmarshal(f.Data, &row); err != nil {
			t.Fatalf("task item %s: %v", f.Data, err)
		}
		w.rows[row.TaskID] = row
	case "events":
		e := decodeEvent(t, f)
		w.events[e.TaskID] = append(w.events[e.TaskID], e)
	case "sampled":
		var d struct {
			Tasks, Events int
			Sent          struct{ Tasks, Events int }
		}
		if err := json.Unmarshal(f.Data, &d); err != nil {
			t.Fatalf("sampled frame %s: %v", f.Data, err)
		}
		w.sampledTasks += d.Tasks
		w.sampledEvents += d.Events
		w.sentTasks += d.Sent.Tasks
		w.sampledFrames++
	case "dropped":
		var d struct{ Count int }
		_ = json.Unmarshal(f.Data, &d)
		w.dropped += d.Count
	}
}

// TestWSFloodIsCoalescedFailuresComplete: what an operator with the Live
// page open sees while the worker serves a flood of requests through the
// real pipeline (16 requests at once: well over 100 tasks a second
// unless the machine crawls, so most successful tasks are sampled; the
// checks hold either way). Frames come coalesced, at most 10 batches a second; the
// successful tasks not listed are counted, and listed plus counted is
// every one; every failed task arrives with all its events (received,
// each attempt's start and end, annotations, its row), and every
// annotation of every task arrives. A second page that reads nothing at
// all does not hold the flood up.
func TestWSFloodIsCoalescedFailuresComplete(t *testing.T) {
	t.Parallel()
	s := floodStack(t)
	ws := wsDial(t, s.ui.Addr(), "/ws", s.uiURL)
	subscribe(t, ws, `{"subscribe":["tasks","events","state"]}`)
	stalled := wsDial(t, s.ui.Addr(), "/ws", s.uiURL) // never read after its ack
	subscribe(t, stalled, `{"subscribe":["tasks","events","state"]}`)
	start := time.Now()

	n, failEvery := 800, 40
	if testing.Short() {
		n = 400
	}
	type result struct {
		id     string
		failed bool
	}
	client := &http.Client{Timeout: wsWait}
	post := func(body string) (result, error) {
		r, err := client.Post(s.inURL+"/v1/process", "application/json", strings.NewReader(body))
		if err != nil {
			return result{}, err
		}
		defer r.Body.Close()
		var out struct {
			Tasks []struct {
				TaskID string `json:"task_id"`
			} `json:"tasks"`
		}
		if err := json.NewDecoder(r.Body).Decode(&out); err != nil || len(out.Tasks) != 1 {
			return result{}, fmt.Errorf("status %d, %d tasks, %v", r.StatusCode, len(out.Tasks), err)
		}
		return result{out.Tasks[0].TaskID, r.StatusCode != 200}, nil
	}
	results := make(chan result, n)
	jobs, stop := make(chan int), make(chan struct{})
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for i := range jobs {
				body := fmt.Sprintf(`{"order":%d}`, i)
				if i%failEvery == 0 {
					body = fmt.Sprintf(`{"order":%d,"note":"please fail"}`, i)
				}
				r, err := post(body)
				if err != nil {
					t.Errorf("request %d: %v", i, err)
					continue
				}
				results <- r
			}
		})
	}
	flooded := make(chan struct{})
	go func() {
		defer close(flooded)
	feed:
		for i := range n {
			select {
			case jobs <- i:
			case <-stop:
				break feed
			}
		}
		close(jobs)
		wg.Wait()
		close(results)
	}()
	// A bound for a hang, not a speed claim: a pipeline held up by the
	// stalled page would never finish.
	select {
	case <-flooded:
	case <-time.After(4 * wsWait):
		close(stop)
		<-flooded
		t.Fatalf("the flood of %d requests did not finish within %s", n, 4*wsWait)
	}
	if t.Failed() {
		t.FailNow()
	}
	failed, ok := map[string]bool{}, map[string]bool{}
	for r := range results {
		if r.failed {
			failed[r.id] = true
		} else {
			ok[r.id] = true
		}
	}
	if len(failed) != (n+failEvery-1)/failEvery || len(ok)+len(failed) != n {
		t.Fatalf("%d ok and %d failed requests, want %d and %d", len(ok), len(failed), n-(n+failEvery-1)/failEvery, (n+failEvery-1)/failEvery)
	}

	w := &wsTally{rows: map[string]event.TaskRow{}, events: map[string][]event.Event{}}
	okListed := func() int {
		k := 0
		for id := range ok {
			if _, listed := w.rows[id]; listed {
				k++
			}
		}
		return k
	}
	complete := func() (bool, string) {
		for id := range failed {
			if w.rows[id].Status == "" {
				return false, "failed task " + id + " has no row"
			}
		}
		for id := range ok {
			if !hasType(w.events[id], event.TypeAnnotation) {
				return false, "task " + id + " has no annotation"
			}
		}
		if got := okListed() + w.sampledTasks; got != len(ok) {
			return false, fmt.Sprintf("%d ok rows listed + %d sampled, want %d", okListed(), w.sampledTasks, len(ok))
		}
		return true, ""
	}
	for done, why := complete(); !done; done, why = complete() {
		if len(ws.pending) == 0 && time.Since(start) > 3*wsWait {
			t.Fatalf("incomplete after %s: %s", time.Since(start), why)
		}
		w.take(t, recv(t, ws, false)) // fails after wsWait without a frame
	}
	elapsed := time.Since(start)

	if w.dropped > 0 {
		t.Errorf("%d items dropped for a client that reads", w.dropped)
	}
	// Coalesced: at most one batch per 100 ms (plus the one in flight).
	if max := int(elapsed/(100*time.Millisecond)) + 2; ws.frames["batch"] > max {
		t.Errorf("%d batch frames in %s, want at most %d (10 a second)", ws.frames["batch"], elapsed, max)
	}
	if ws.items < n {
		t.Errorf("%d items in %d batch frames, want at least one per task (%d)", ws.items, ws.frames["batch"], n)
	}
	// Truthful counts: the routine rows sent, as the sampled frames say,
	// are the ones listed, when anything was sampled.
	if w.sampledTasks > 0 && w.sentTasks > okListed() {
		t.Errorf("sampled frames say %d routine rows sent, the client listed %d", w.sentTasks, okListed())
	}
	for id := range failed {
		row, evs := w.rows[id], w.events[id]
		if row.Status != "failed" || row.Attempts != s.cfg.Handler.MaxAttempts {
			t.Errorf("failed task %s row = %s after %d attempts, want failed after %d", id, row.Status, row.Attempts, s.cfg.Handler.MaxAttempts)
		}
		count := map[string]int{}
		for _, e := range evs {
			count[e.Type]++
		}
		if count[event.TypeTaskReceived] != 1 || count[event.TypeExecutorStarted] != row.Attempts ||
			count[event.TypeExecutorFinished] != row.Attempts || count[event.TypeAnnotation] == 0 {
			t.Errorf("failed task %s events %v, want task_received once, executor_started and executor_finished %d times, annotations", id, count, row.Attempts)
		}
	}
	t.Logf("%d requests (%d failed) in %s: %d batch frames with %d items, %d sampled frames (%d ok rows and %d routine events not listed), %d ok rows listed",
		n, len(failed), elapsed.Round(time.Millisecond), ws.frames["batch"], ws.items, w.sampledFrames, w.sampledTasks, w.sampledEvents, okListed())
}

func hasType(evs []event.Event, typ string) bool {
	for _, e := range evs {
		if e.Type == typ {
			return true
		}
	}
	return false
}

// BenchmarkWSFlood guards the Live page's cost at full load: the recorder
// takes a flood of annotated tasks (per op one task: its routine
// lifecycle events, an annotation and its row, as echo-go's tasks at full
// load), with no subscriber and with one /ws client subscribed to every
// stream; the difference is the Live page's cost per task. With the
// client, ns/op is the wall time per task until it has read every
// annotation: the publisher's work plus the socket writer's (encoding,
// writes). The batch interval is 0 here (a batch as soon as the writer is
// free) and the queue large enough to drop nothing, so the figure is the
// work, not the 100 ms wait; frames/op shows the coalescing.
func BenchmarkWSFlood(b *testing.B) {
	s := startStack(b, testConfig(b, "/bin/cat"))
	payload := json.RawMessage(`{"bytes":1024,"attempt":1}`)
	fin := json.RawMessage(`{"attempt":1,"status":"ok","exit_code":0,"duration_ms":1,"output_size_bytes":1024}`)
	received := json.RawMessage(`{"source":"http","alias":"","input_size_bytes":1024}`)
	started := json.RawMessage(`{"attempt":1}`)
	labels := map[string]string{"tenant": "acme"}
	task := func(i int) {
		id := "bench-" + strconv.Itoa(i)
		s.rec.Event(event.Event{Type: event.TypeTaskReceived, TaskID: id, Labels: labels, Payload: received})
		s.rec.Event(event.Event{Type: event.TypeExecutorStarted, TaskID: id, Labels: labels, Payload: started})
		s.rec.Event(event.Event{Type: event.TypeExecutorFinished, TaskID: id, Labels: labels, Payload: fin})
		s.rec.Event(event.Event{Type: event.TypeAnnotation, Kind: "echo.size", TaskID: id, Labels: labels, Payload: payload})
		s.rec.Task(event.TaskRow{TaskID: id, Source: "http", Status: "ok", Attempts: 1, Labels: labels, Partition: -1, Offset: -1})
	}
	b.Run("no_subscriber", func(b *testing.B) {
		b.ReportAllocs()
		cpu := processCPU(b)
		for i := range b.N {
			task(i)
		}
		b.ReportMetric(float64(processCPU(b)-cpu)/float64(b.N), "cpu-ns/op")
	})
	b.Run("one_subscriber", func(b *testing.B) {
		srv := httptest.NewServer(s.ui.newWSEndpoint(wsLimits{maxConns: 4, subBuffer: 1 << 22, writeTimeout: wsWait, pingEvery: time.Hour}))
		defer srv.Close()
		cfg, err := websocket.NewConfig("ws://"+strings.TrimPrefix(srv.URL, "http://")+"/ws", "http://localhost")
		if err != nil {
			b.Fatal(err)
		}
		ws, err := websocket.DialConfig(cfg)
		if err != nil {
			b.Fatal(err)
		}
		defer ws.Close()
		if err := websocket.Message.Send(ws, `{"subscribe":["tasks","events","state"]}`); err != nil {
			b.Fatal(err)
		}
		var frames, notes, dropped atomic.Int64
		got := make(chan struct{}, 1)
		go func() {
			for {
				var msg []byte
				if err := websocket.Message.Receive(ws, &msg); err != nil {
					return
				}
				frames.Add(1)
				notes.Add(int64(bytes.Count(msg, []byte(`"type":"annotation"`))))
				if bytes.HasPrefix(msg, []byte(`{"stream":"dropped"`)) {
					dropped.Add(1)
				}
				select {
				case got <- struct{}{}:
				default:
				}
			}
		}()
		<-got // the acknowledgement
		frames.Store(0)
		b.ReportAllocs()
		b.ResetTimer()
		cpu := processCPU(b)
		for i := range b.N {
			task(i)
		}
		for notes.Load() < int64(b.N) {
			select {
			case <-got:
			case <-time.After(wsWait):
				b.Fatalf("the client got %d of %d annotations (%d dropped frames)", notes.Load(), b.N, dropped.Load())
			}
		}
		b.StopTimer()
		b.ReportMetric(float64(processCPU(b)-cpu)/float64(b.N), "cpu-ns/op")
		b.ReportMetric(float64(frames.Load())/float64(b.N), "frames/op")
	})
}

// processCPU is the user and system CPU time this process used so far: on
// a shared machine a steadier figure than wall time (the client reading
// the socket runs in this process too).
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
