package httpd

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/websocket"

	"svc/worker/event"
	"svc/worker/workertest/wait"
)

// dialSmallWindow connects a /ws client whose receive buffer is 4 KiB, so
// a client that never reads stops taking bytes after a few frames (the
// loopback default lets the kernel absorb megabytes first); it waits for
// the acknowledgement of sub and never reads again.
func dialSmallWindow(t *testing.T, addr, sub string) *websocket.Conn {
	t.Helper()
	cfg, err := websocket.NewConfig("ws://"+addr+"/ws", "http://localhost")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Dialer = &net.Dialer{Timeout: wsWait, Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4<<10) })
		if err != nil {
			return err
		}
		return serr
	}}
	ws, err := websocket.DialConfig(cfg)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { ws.Close() })
	_ = ws.SetDeadline(time.Now().Add(wsWait))
	if err := websocket.Message.Send(ws, sub); err != nil {
		t.Fatal(err)
	}
	var ack string
	if err := websocket.Message.Receive(ws, &ack); err != nil || !strings.HasPrefix(ack, `{"stream":"subscribed"`) {
		t.Fatalf("ack %q, %v", ack, err)
	}
	return ws
}

// TestWSIdleWatchersAreBounded is issue 38's herd: 64 sockets subscribed
// to tasks, events and state that never read, while the recorder takes
// what a busy pipeline records (failed tasks with annotations of 4 KiB: a
// flow no sampling thins out, up to 4 MB a second), and one socket that
// reads. The herd costs one live subscription, not 64 (the pipeline's
// per-item work does not grow with it); the bytes held for all sockets
// stay within the budget and the heap within a wide margin of it; every
// idle socket is shed and counted; the reading socket keeps receiving
// everything, to the last annotation.
func TestWSIdleWatchersAreBounded(t *testing.T) {
	// Not parallel: the heap it measures is the process's.
	const idle = 64
	const budget = 8 << 20
	s, addr, e := wsTestEndpoint(t, wsLimits{maxConns: idle + 2, subBuffer: 4096, writeTimeout: 2 * time.Second,
		pingEvery: time.Hour, flushEvery: wsFlushInterval, sockBacklog: 2 << 20, budget: budget})
	const sub = `{"subscribe":["tasks","events","state"]}`

	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	heap0 := ms.HeapAlloc

	reader := wsDial(t, addr, "/ws", "http://localhost")
	subscribe(t, reader, sub)
	var last atomic.Int64 // the newest annotation seq the reader saw
	var readBytes atomic.Int64
	readErr := make(chan error, 1)
	go func() {
		for {
			_ = reader.SetReadDeadline(time.Now().Add(wsWait))
			var msg []byte
			if err := websocket.Message.Receive(reader.Conn, &msg); err != nil {
				readErr <- err
				return
			}
			readBytes.Add(int64(len(msg)))
			if i := bytes.LastIndex(msg, []byte(`"kind":"seq-`)); i >= 0 {
				var n int64
				fmt.Sscanf(string(msg[i+len(`"kind":"seq-`):]), "%d", &n)
				last.Store(n)
			}
		}
	}()
	for range idle {
		dialSmallWindow(t, addr, sub)
	}
	if n := s.rec.Stats().Subscribers; n != 1 {
		t.Errorf("%d live subscriptions in the recorder for %d sockets with one subscription, want 1", n, idle+1)
	}

	payload := json.RawMessage(`"` + strings.Repeat("x", 4<<10) + `"`)
	var seq int64
	publish := func() { // 10 failed tasks: an annotation (4 KiB), their events and rows
		for range 10 {
			seq++
			id := fmt.Sprint("idle-", seq)
			s.rec.Event(event.Event{Type: event.TypeTaskReceived, TaskID: id, Payload: json.RawMessage(`{"source":"http"}`)})
			s.rec.Event(event.Event{Type: event.TypeAnnotation, Kind: fmt.Sprint("seq-", seq), TaskID: id, Payload: payload})
			s.rec.Task(event.TaskRow{TaskID: id, Source: "http", Status: "failed", Attempts: 1})
		}
	}
	var peakHeap, peakHeld uint64
	samples := 0
	sample := func() { // the live heap, after a collection every 10th sample
		peakHeld = max(peakHeld, uint64(e.hub.held.Load()))
		if samples++; samples%10 != 1 {
			return
		}
		runtime.GC()
		runtime.ReadMemStats(&ms)
		peakHeap = max(peakHeap, ms.HeapAlloc)
	}
	start := time.Now()
	for e.hub.shedTotal.Load() < idle && time.Since(start) < wsWait {
		publish()
		sample()
		time.Sleep(10 * time.Millisecond)
	}
	sample()
	if got := e.hub.shedTotal.Load(); got < idle {
		t.Errorf("%d of %d idle sockets shed after %s", got, idle, time.Since(start).Round(time.Millisecond))
	}
	if peakHeld > 2*budget {
		t.Errorf("the sockets' frames held %d bytes at most, want at most twice the budget (%d)", peakHeld, budget)
	}
	// Wide: the recorder's own buffers and the test's are in it too.
	if grown := int64(peakHeap) - int64(heap0); grown > 64<<20 {
		t.Errorf("heap grew by %d MiB with %d idle watchers, want under 64 MiB", grown>>20, idle)
	}
	wait.For(t, wsWait, "the reader to see the last annotation", func() (bool, string) {
		select {
		case err := <-readErr:
			t.Fatalf("the reading socket failed: %v", err)
		default:
		}
		return last.Load() == seq, fmt.Sprintf("seq %d of %d", last.Load(), seq)
	})
	t.Logf("%d tasks in %s: reader read %d MiB; shed %d (backlog %d, budget %d, write_timeout %d); held at most %d KiB; heap grew %d MiB at most",
		seq, time.Since(start).Round(time.Millisecond), readBytes.Load()>>20, e.hub.shedTotal.Load(), shedCount(e.hub, "backlog"),
		shedCount(e.hub, "budget"), shedCount(e.hub, "write_timeout"), peakHeld>>10, (int64(peakHeap)-int64(heap0))>>20)
}

// A socket shed for falling behind is told so: once its client reads
// again it finds the frames it was sent, then an error frame too_slow,
// then the end of the socket; the shed is counted and its queue freed.
func TestWSShedSocketIsTold(t *testing.T) {
	t.Parallel()
	s, addr, e := wsTestEndpoint(t, wsLimits{maxConns: 4, subBuffer: 4096, writeTimeout: wsWait, pingEvery: time.Hour,
		sockBacklog: 64 << 10, closeTimeout: wsWait})
	ws := dialSmallWindow(t, addr, `{"subscribe":["events"],"event_types":["annotation"]}`)
	payload := json.RawMessage(`"` + strings.Repeat("x", 16<<10) + `"`)
	wait.For(t, wsWait, "the socket to be shed", func() (bool, string) {
		for range 20 {
			s.rec.Event(event.Event{Type: event.TypeAnnotation, Kind: "ws-shed", Payload: payload})
		}
		return e.hub.shedTotal.Load() == 1, fmt.Sprintf("%d shed", e.hub.shedTotal.Load())
	})
	if got := shedCount(e.hub, "backlog"); got != 1 {
		t.Errorf("shed for backlog %d times, want 1", got)
	}
	var last string
	frames := 0
	for {
		_ = ws.SetReadDeadline(time.Now().Add(wsWait))
		var msg string
		if err := websocket.Message.Receive(ws, &msg); err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatalf("socket still open after %d frames", frames)
			}
			break
		}
		frames++
		last = msg
	}
	var f struct {
		Stream string
		Data   ErrorBody
	}
	if err := json.Unmarshal([]byte(last), &f); err != nil || f.Stream != "error" || f.Data.Error != "too_slow" || !strings.Contains(f.Data.Detail, "reconnect") {
		t.Errorf("last frame %.200q, want an error frame too_slow", last)
	}
	wait.For(t, wsWait, "the socket to close", func() (bool, string) {
		return e.hub.conns.Load() == 0 && e.hub.held.Load() == 0, fmt.Sprintf("%d sockets, %d bytes held", e.hub.conns.Load(), e.hub.held.Load())
	})
}

// Sockets with the same subscription share one; distinct subscriptions
// are bounded (maxGroups), a socket alone in its subscription may still
// change it, and the shed series are on the worker's registry.
func TestWSSubscriptionsShared(t *testing.T) {
	t.Parallel()
	s, addr, e := wsTestEndpoint(t, wsLimits{maxConns: 8, subBuffer: 64, writeTimeout: wsWait, pingEvery: time.Hour, maxGroups: 2})
	a := wsDial(t, addr, "/ws", "http://localhost")
	b := wsDial(t, addr, "/ws", "http://localhost")
	c := wsDial(t, addr, "/ws", "http://localhost")
	subscribe(t, a, `{"subscribe":["tasks"]}`)
	subscribe(t, b, `{"subscribe":["events"],"event_types":["annotation","dlq_sent"]}`)
	subscribe(t, c, `{"subscribe":["events"],"event_types":["dlq_sent","annotation"]}`) // the same set
	sendText(t, c, `{"subscribe":["state"]}`)
	if f := recv(t, c, false); f.Stream != "error" || !strings.Contains(string(f.Data), "too_many_subscriptions") {
		t.Fatalf("a third distinct subscription got %s %s, want error too_many_subscriptions", f.Stream, f.Data)
	}
	subscribe(t, a, `{"subscribe":["state"]}`) // alone in its subscription: replaced
	if n, g := s.rec.Stats().Subscribers, e.hub.subscriptions(); n != 2 || g != 2 {
		t.Errorf("%d recorder subscriptions, %d groups, want 2", n, g)
	}
	s.rec.Event(event.Event{Type: event.TypeAnnotation, Kind: "shared", Payload: json.RawMessage(`{}`)})
	s.rec.State("shared-state", nil)
	for _, ws := range []*wsClient{b, c} { // c kept its subscription
		if f := recv(t, ws, false); f.Stream != "events" || decodeEvent(t, f).Kind != "shared" {
			t.Errorf("got %s %s, want the annotation", f.Stream, f.Data)
		}
	}
	if f := recv(t, a, false); f.Stream != "state" || decodeEvent(t, f).Kind != "shared-state" {
		t.Errorf("got %s %s, want the state event", f.Stream, f.Data)
	}

	// The worker's own endpoint registered its series.
	mfs, err := s.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]int{}
	for _, mf := range mfs {
		if strings.HasPrefix(mf.GetName(), "svc_ui_ws_") {
			found[mf.GetName()] = len(mf.GetMetric())
		}
	}
	if found["svc_ui_ws_shed_total"] != 3 || found["svc_ui_ws_pending_bytes"] != 1 || found["svc_ui_ws_connections"] != 1 || found["svc_ui_ws_subscriptions"] != 1 {
		t.Errorf("ws series %v, want svc_ui_ws_shed_total by 3 reasons and the three gauges", found)
	}
}

// Over the budget for all sockets, the sockets furthest behind are shed
// (reason budget) even though none passed its own backlog bound; a
// socket that reads is not.
func TestWSBudgetShedsFurthestBehind(t *testing.T) {
	t.Parallel()
	const idle = 4
	s, addr, e := wsTestEndpoint(t, wsLimits{maxConns: idle + 2, subBuffer: 4096, writeTimeout: wsWait, pingEvery: time.Hour,
		flushEvery: 50 * time.Millisecond, sockBacklog: 64 << 20, budget: 2 << 20})
	const sub = `{"subscribe":["events"],"event_types":["annotation"]}`
	reader := wsDial(t, addr, "/ws", "http://localhost")
	subscribe(t, reader, sub)
	for range idle {
		dialSmallWindow(t, addr, sub)
	}
	var last atomic.Int64
	go func() {
		for {
			_ = reader.SetReadDeadline(time.Now().Add(wsWait))
			var msg []byte
			if websocket.Message.Receive(reader.Conn, &msg) != nil {
				return
			}
			if i := bytes.LastIndex(msg, []byte(`"kind":"seq-`)); i >= 0 {
				var n int64
				fmt.Sscanf(string(msg[i+len(`"kind":"seq-`):]), "%d", &n)
				last.Store(n)
			}
		}
	}()
	payload := json.RawMessage(`"` + strings.Repeat("x", 16<<10) + `"`)
	var seq int64
	wait.For(t, wsWait, "the idle sockets to be shed", func() (bool, string) {
		for range 10 {
			seq++
			s.rec.Event(event.Event{Type: event.TypeAnnotation, Kind: fmt.Sprint("seq-", seq), Payload: payload})
		}
		return e.hub.shedTotal.Load() >= idle, fmt.Sprintf("%d shed", e.hub.shedTotal.Load())
	})
	if b, o := shedCount(e.hub, "budget"), e.hub.shedTotal.Load(); b != idle || o != idle {
		t.Errorf("%d shed for the budget, %d in all, want %d and %d", b, o, idle, idle)
	}
	wait.For(t, wsWait, "the reader to see the last annotation", func() (bool, string) {
		return last.Load() == seq, fmt.Sprintf("seq %d of %d", last.Load(), seq)
	})
	if got := e.hub.shedTotal.Load(); got != idle {
		t.Errorf("%d sockets shed, want the %d idle ones only", got, idle)
	}
}

// A writer that stays one frame behind never empties its queue: the
// queue must not grow with every frame it ever carried.
func TestWSSockQueueStaysCompact(t *testing.T) {
	h := newWSHub(nil, wsLimits{sockBacklog: 1 << 20}, quietLogger())
	s := &wsSock{hub: h, ready: make(chan struct{}, 1)}
	s.push(h.newOut([]byte("first"), 1))
	for range 100_000 {
		s.push(h.newOut([]byte("next"), 1))
		o, shed := s.next()
		if o == nil || shed != "" {
			t.Fatalf("next = %v, %q", o, shed)
		}
		h.release(o)
	}
	if n := cap(s.queue); n > 64 {
		t.Errorf("queue capacity %d after 100,000 frames one behind, want a few", n)
	}
	if held := h.held.Load(); held != int64(len("next")) {
		t.Errorf("%d bytes held, want the one queued frame's %d", held, len("next"))
	}
}
