package httpd

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"golang.org/x/net/websocket"

	"svc/recorder"
	"svc/worker/event"
	"svc/worker/workertest/wait"
)

// wsWait bounds every wait of these tests; generous, never a timing claim.
const wsWait = 30 * time.Second

// rawUpgrade sends a WebSocket upgrade request by hand (the x/net client
// always sends an Origin and hides the status) and returns the response.
func rawUpgrade(t *testing.T, addr, target, host string, header ...string) resp {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, wsWait)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(wsWait))
	if host == "" {
		host = addr
	}
	req := "GET " + target + " HTTP/1.1\r\nHost: " + host + "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
	for i := 0; i+1 < len(header); i += 2 {
		req += header[i] + ": " + header[i+1] + "\r\n"
	}
	if _, err := io.WriteString(conn, req+"\r\n"); err != nil {
		t.Fatal(err)
	}
	r, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("upgrade %s: %v", target, err)
	}
	defer r.Body.Close()
	var body []byte
	if r.StatusCode != http.StatusSwitchingProtocols {
		body, _ = io.ReadAll(io.LimitReader(r.Body, 4096))
	}
	return resp{status: r.StatusCode, header: r.Header, body: string(body)}
}

// wsClient is a test client: it hands out the items of batch frames one
// by one, as frames of their own, and counts the frames it read.
type wsClient struct {
	*websocket.Conn
	pending []testFrame    // items of the last batch not handed out yet
	frames  map[string]int // socket frames read, by stream
	items   int            // items read from batch frames
}

// wsDial connects a real client; header pairs are added to the handshake.
func wsDial(t *testing.T, addr, target, origin string, header ...string) *wsClient {
	t.Helper()
	cfg, err := websocket.NewConfig("ws://"+addr+target, origin)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		cfg.Header.Set(header[i], header[i+1])
	}
	ws, err := websocket.DialConfig(cfg)
	if err != nil {
		t.Fatalf("dial %s: %v", target, err)
	}
	t.Cleanup(func() { ws.Close() })
	return &wsClient{Conn: ws, frames: map[string]int{}}
}

type testFrame struct {
	Stream string          `json:"stream"`
	Data   json.RawMessage `json:"data"`
}

// recv returns the next frame, an item of a batch frame as a frame of its
// own; pings are skipped unless keepPings.
func recv(t *testing.T, ws *wsClient, keepPings bool) testFrame {
	t.Helper()
	for {
		if len(ws.pending) > 0 {
			f := ws.pending[0]
			ws.pending = ws.pending[1:]
			return f
		}
		_ = ws.SetReadDeadline(time.Now().Add(wsWait))
		var msg string
		if err := websocket.Message.Receive(ws.Conn, &msg); err != nil {
			t.Fatalf("receive: %v", err)
		}
		var f testFrame
		if err := json.Unmarshal([]byte(msg), &f); err != nil {
			t.Fatalf("frame %q is not JSON: %v", msg, err)
		}
		ws.frames[f.Stream]++
		if f.Stream == "batch" {
			if err := json.Unmarshal(f.Data, &ws.pending); err != nil || len(ws.pending) == 0 {
				t.Fatalf("batch frame %.200s: %v (want a non-empty list of frames)", f.Data, err)
			}
			for _, it := range ws.pending {
				if it.Stream != "tasks" && it.Stream != "events" && it.Stream != "state" {
					t.Fatalf("batch item of stream %q, want tasks, events or state", it.Stream)
				}
			}
			ws.items += len(ws.pending)
			continue
		}
		if f.Stream != "ping" || keepPings {
			return f
		}
	}
}

func sendText(t *testing.T, ws *wsClient, msg string) {
	t.Helper()
	_ = ws.SetWriteDeadline(time.Now().Add(wsWait))
	if err := websocket.Message.Send(ws.Conn, msg); err != nil {
		t.Fatalf("send: %v", err)
	}
}

// subscribe sends msg and waits for its acknowledgement, after which the
// new subscription is in force.
func subscribe(t *testing.T, ws *wsClient, msg string) {
	t.Helper()
	sendText(t, ws, msg)
	if f := recv(t, ws, false); f.Stream != "subscribed" {
		t.Fatalf("after %s got %s %s, want subscribed", msg, f.Stream, f.Data)
	}
}

// readUntil collects frames until done reports true on one of them.
func readUntil(t *testing.T, ws *wsClient, done func(testFrame) bool) []testFrame {
	t.Helper()
	var got []testFrame
	for {
		f := recv(t, ws, false)
		got = append(got, f)
		if done(f) {
			return got
		}
	}
}

func decodeEvent(t *testing.T, f testFrame) event.Event {
	t.Helper()
	var e event.Event
	if err := json.Unmarshal(f.Data, &e); err != nil {
		t.Fatalf("%s frame data %s: %v", f.Stream, f.Data, err)
	}
	return e
}

// readClosed reads until the server ends the socket and fails on a
// timeout; it returns the items read (a batch frame's items, or one for
// any other frame).
func readClosed(t *testing.T, ws *wsClient) int {
	t.Helper()
	n := 0
	for {
		_ = ws.SetReadDeadline(time.Now().Add(wsWait))
		var msg string
		err := websocket.Message.Receive(ws.Conn, &msg)
		if err == nil {
			var f struct {
				Stream string            `json:"stream"`
				Data   []json.RawMessage `json:"data"`
			}
			if json.Unmarshal([]byte(msg), &f) == nil && f.Stream == "batch" {
				n += len(f.Data)
			} else {
				n++
			}
			continue
		}
		if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
			t.Fatalf("socket still open after %s (%d items read)", wsWait, n)
		}
		return n
	}
}

// wsTestServer serves one endpoint with custom limits on a real listener,
// backed by a started stack's UI server and recorder.
func wsTestServer(t *testing.T, lim wsLimits) (*stack, string) {
	t.Helper()
	s, addr, _ := wsTestEndpoint(t, lim)
	return s, addr
}

// wsTestEndpoint is wsTestServer that also returns the endpoint.
func wsTestEndpoint(t *testing.T, lim wsLimits) (*stack, string, *wsEndpoint) {
	t.Helper()
	s := startStack(t, testConfig(t, "/bin/cat"))
	e := s.ui.newWSEndpoint(lim)
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	return s, strings.TrimPrefix(srv.URL, "http://"), e
}

func TestWSStreamsTaskOfIngressRequest(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, "/bin/cat")
	cfg.UI.AuthToken = "ui-secret-0123456789"
	withClients(cfg, 600)
	s := startStack(t, cfg)
	ws := wsDial(t, s.ui.Addr(), "/ws?token=ui-secret-0123456789", s.uiURL)
	subscribe(t, ws, `{"subscribe":["tasks","events"]}`)

	r := do(t, "POST", s.inURL+"/v1/process", "hello", "Authorization", "Bearer tok-alpha-0123456789")
	var out struct {
		Tasks []struct {
			TaskID string `json:"task_id"`
		} `json:"tasks"`
	}
	if err := json.Unmarshal([]byte(r.body), &out); err != nil || r.status != 200 || len(out.Tasks) != 1 {
		t.Fatalf("ingress = %d %s", r.status, r.body)
	}
	id := out.Tasks[0].TaskID
	var row event.TaskRow
	types := map[string]bool{}
	readUntil(t, ws, func(f testFrame) bool {
		switch f.Stream {
		case "tasks":
			var tr event.TaskRow
			if err := json.Unmarshal(f.Data, &tr); err != nil {
				t.Fatalf("task frame %s: %v", f.Data, err)
			}
			if tr.TaskID == id {
				row = tr
			}
		case "events":
			if e := decodeEvent(t, f); e.TaskID == id {
				types[e.Type] = true
			}
		}
		return row.TaskID != "" && types[event.TypeTaskReceived] && types[event.TypeExecutorFinished]
	})
	if row.Status != "ok" || row.Source != "http" {
		t.Errorf("task row = %+v, want status ok, source http", row)
	}
}

func TestWSEventTypesAndStreams(t *testing.T) {
	t.Parallel()
	s := startStack(t, testConfig(t, "/bin/cat"))
	ws := wsDial(t, s.ui.Addr(), "/ws", s.uiURL)
	ann := func(kind string) {
		s.rec.Event(event.Event{Type: event.TypeAnnotation, Kind: kind, Payload: json.RawMessage(`{}`)})
	}

	t.Run("event_types", func(t *testing.T) {
		subscribe(t, ws, `{"subscribe":["events"],"event_types":["annotation"]}`)
		s.rec.Event(event.Event{Type: event.TypeTaskReceived, TaskID: "ws-filtered"})
		s.rec.State("ws-state-filtered", nil)
		ann("ws-k1")
		got := readUntil(t, ws, func(f testFrame) bool { return f.Stream == "events" && decodeEvent(t, f).Kind == "ws-k1" })
		for _, f := range got {
			if e := decodeEvent(t, f); f.Stream != "events" || e.Type != event.TypeAnnotation {
				t.Errorf("got %s frame of type %s, want only annotation events", f.Stream, e.Type)
			}
		}
	})
	t.Run("resubscribe to state and tasks", func(t *testing.T) {
		subscribe(t, ws, `{"subscribe":["state","tasks"]}`)
		ann("ws-k2")
		s.rec.State("ws-state-1", nil)
		s.rec.Task(event.TaskRow{TaskID: "ws-t1", Source: "probe", Status: "ok"})
		var state, task bool
		got := readUntil(t, ws, func(f testFrame) bool {
			switch f.Stream {
			case "state":
				state = state || decodeEvent(t, f).Kind == "ws-state-1"
			case "tasks":
				task = task || strings.Contains(string(f.Data), `"task_id":"ws-t1"`)
			}
			return state && task
		})
		for _, f := range got {
			if f.Stream == "events" {
				t.Errorf("events frame %s after unsubscribing events", f.Data)
			}
			if f.Stream == "state" && decodeEvent(t, f).Type != event.TypeState {
				t.Errorf("state frame carries %s", f.Data)
			}
		}
	})
	t.Run("state on both streams", func(t *testing.T) {
		subscribe(t, ws, `{"subscribe":["events","state"]}`)
		s.rec.State("ws-state-2", nil)
		seen := map[string]bool{}
		readUntil(t, ws, func(f testFrame) bool {
			if (f.Stream == "events" || f.Stream == "state") && decodeEvent(t, f).Kind == "ws-state-2" {
				seen[f.Stream] = true
			}
			return seen["events"] && seen["state"]
		})
	})
	t.Run("unsubscribe all", func(t *testing.T) {
		subscribe(t, ws, `{"subscribe":[]}`)
		ann("ws-k3")
		s.rec.Task(event.TaskRow{TaskID: "ws-t2"})
		subscribe(t, ws, `{"subscribe":["events"],"event_types":["annotation"]}`)
		ann("ws-k4")
		got := readUntil(t, ws, func(f testFrame) bool { return f.Stream == "events" && decodeEvent(t, f).Kind == "ws-k4" })
		if len(got) != 1 {
			t.Errorf("got %d frames, want only ws-k4: %v", len(got), got)
		}
	})
}

func TestWSBadClientMessages(t *testing.T) {
	t.Parallel()
	s := startStack(t, testConfig(t, "/bin/cat"))
	ws := wsDial(t, s.ui.Addr(), "/ws", s.uiURL)
	cases := []struct{ name, msg, code, detail string }{
		{"not json", "hello", "bad_request", "expected"},
		{"unknown stream", `{"subscribe":["tasks","nope"]}`, "bad_request", `unknown stream "nope"`},
		{"missing subscribe", `{"event_types":["annotation"]}`, "bad_request", `missing "subscribe"`},
		{"frame over 64 KiB", `{"subscribe":["` + strings.Repeat("x", 100<<10) + `"]}`, "frame_too_large", "65536"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sendText(t, ws, c.msg)
			f := recv(t, ws, false)
			var e ErrorBody
			if err := json.Unmarshal(f.Data, &e); err != nil || f.Stream != "error" || e.Error != c.code || !strings.Contains(e.Detail, c.detail) {
				t.Fatalf("after %.40q got %s %s, want error %s mentioning %q", c.msg, f.Stream, f.Data, c.code, c.detail)
			}
		})
	}
	subscribe(t, ws, `{"subscribe":["tasks"]}`) // the socket survived
}

func TestWSPing(t *testing.T) {
	t.Parallel()
	_, addr := wsTestServer(t, wsLimits{maxConns: 4, subBuffer: 16, writeTimeout: wsWait, pingEvery: 20 * time.Millisecond})
	ws := wsDial(t, addr, "/ws", "http://localhost")
	if f := recv(t, ws, true); f.Stream != "ping" || f.Data != nil {
		t.Fatalf("got %s %s, want {\"stream\":\"ping\"}", f.Stream, f.Data)
	}
}

func TestWSConnectionLimit(t *testing.T) {
	t.Parallel()
	_, addr := wsTestServer(t, wsLimits{maxConns: 1, subBuffer: 16, writeTimeout: wsWait, pingEvery: time.Hour})
	first := wsDial(t, addr, "/ws", "http://localhost")
	subscribe(t, first, `{"subscribe":["tasks"]}`)
	r := rawUpgrade(t, addr, "/ws", "", "Origin", "http://localhost")
	if r.status != 503 || !strings.Contains(r.body, "too_many_connections") || r.header.Get("Retry-After") == "" {
		t.Fatalf("second socket = %d %s, want 503 too_many_connections with Retry-After", r.status, r.body)
	}
	first.Close()
	wait.For(t, wsWait, "the slot to free up", func() (bool, string) {
		r := rawUpgrade(t, addr, "/ws", "", "Origin", "http://localhost")
		return r.status == 101, fmt.Sprintf("upgrade %d %s", r.status, r.body)
	})
}

func TestWSWithoutRecorder(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, "/bin/cat")
	ui := &UIServer{cfg: cfg, log: quietLogger()}
	srv := httptest.NewServer(ui.newWSEndpoint(defaultWSLimits()))
	defer srv.Close()
	r := rawUpgrade(t, strings.TrimPrefix(srv.URL, "http://"), "/ws", "")
	if r.status != 503 || !strings.Contains(r.body, "recorder_unavailable") {
		t.Fatalf("upgrade = %d %s, want 503 recorder_unavailable", r.status, r.body)
	}
}

// A client that stops reading must neither slow the recorder nor be
// buffered for: Event calls keep returning, the socket is shed (counted)
// and closed.
func TestWSSlowClientDoesNotBlockRecorder(t *testing.T) {
	t.Parallel()
	s, addr, e := wsTestEndpoint(t, wsLimits{maxConns: 4, subBuffer: 16, writeTimeout: 300 * time.Millisecond, pingEvery: time.Hour})
	ws := wsDial(t, addr, "/ws", "http://localhost")
	subscribe(t, ws, `{"subscribe":["events"]}`)
	before := s.rec.Stats()

	const n = 2000 // x 16 KiB: far more than the socket buffers hold
	payload := json.RawMessage(`"` + strings.Repeat("x", 16<<10) + `"`)
	flood := func(k int) {
		done := make(chan struct{})
		go func() {
			defer close(done)
			for range k {
				s.rec.Event(event.Event{Type: event.TypeAnnotation, Kind: "ws-flood", Payload: payload})
			}
		}()
		select {
		case <-done:
		case <-time.After(wsWait):
			t.Fatal("event.Event blocked behind a client that does not read")
		}
	}
	flood(n)
	// The socket is shed once its backlog passes 4 MiB or a write is
	// stuck for writeTimeout; on a loaded machine it may have kept up so
	// far, so events keep coming until the socket buffers are full.
	wait.For(t, wsWait, "the server to shed the socket", func() (bool, string) {
		if n := s.rec.Stats().Subscribers; n != 0 {
			flood(50)
			return false, fmt.Sprintf("%d subscribers", n)
		}
		return true, ""
	})
	frames := readClosed(t, ws)
	after := s.rec.Stats()
	if got := after.EventsWritten - before.EventsWritten; got < n {
		t.Errorf("recorder stored %d events, want at least %d", got, n)
	}
	if e.hub.shedTotal.Load() != 1 {
		t.Errorf("%d sockets shed, want 1", e.hub.shedTotal.Load())
	}
	if held := e.hub.held.Load(); held != 0 {
		t.Errorf("%d bytes still accounted to sockets after the only one closed", held)
	}
	t.Logf("client received %d frames; shed %v", frames, shedCount(e.hub, "backlog"))
}

func TestWSShutdownClosesSockets(t *testing.T) {
	t.Parallel()
	s := startStack(t, testConfig(t, "/bin/cat"))
	ws := wsDial(t, s.ui.Addr(), "/ws", s.uiURL)
	subscribe(t, ws, `{"subscribe":["tasks"]}`)
	s.stop()
	readClosed(t, ws)
	wait.For(t, wsWait, "the subscription to end", func() (bool, string) {
		n := s.rec.Stats().Subscribers
		return n == 0, fmt.Sprintf("%d subscribers", n)
	})
}

// Items recorded faster than a subscription's queue holds between two
// batches are missed, and every socket of that subscription is told how
// many.
func TestWSDroppedFrame(t *testing.T) {
	t.Parallel()
	// A batch a second at most, 16 items of a kind between two: a burst
	// of 2000 overflows it.
	s, addr := wsTestServer(t, wsLimits{maxConns: 4, subBuffer: 16, writeTimeout: wsWait, pingEvery: time.Hour, flushEvery: time.Second})
	ws := wsDial(t, addr, "/ws", "http://localhost")
	subscribe(t, ws, `{"subscribe":["events"],"event_types":["annotation"]}`)
	before := s.rec.Stats().SubscriberDrops
	payload := json.RawMessage(`"` + strings.Repeat("x", 1<<10) + `"`)
	for range 2000 {
		s.rec.Event(event.Event{Type: event.TypeAnnotation, Kind: "ws-flood", Payload: payload})
	}
	drops := s.rec.Stats().SubscriberDrops - before
	if drops == 0 {
		t.Fatal("no subscriber drops: the burst fitted in the queue")
	}
	var count, total uint64
	readUntil(t, ws, func(f testFrame) bool {
		if f.Stream != "dropped" {
			return false
		}
		var d struct{ Count, Total uint64 }
		if err := json.Unmarshal(f.Data, &d); err != nil {
			t.Fatalf("dropped frame %s: %v", f.Data, err)
		}
		count, total = count+d.Count, d.Total
		return total >= drops
	})
	if count != drops || total != drops {
		t.Errorf("dropped frame count %d total %d, want %d (the subscription's drops)", count, total, drops)
	}
}

// TestWSRefusalsAreJSON: a plain GET of /ws and a refused origin answer
// with the JSON error shape, not plain text or an empty body.
func TestWSRefusalsAreJSON(t *testing.T) {
	t.Parallel()
	s, addr := wsTestServer(t, defaultWSLimits())
	r := do(t, "GET", "http://"+addr+"/ws", "")
	if r.status != 426 || !strings.Contains(r.body, `"error":"upgrade_required"`) || r.header.Get("Upgrade") != "websocket" {
		t.Errorf("GET /ws without upgrade = %d %s, want 426 upgrade_required", r.status, r.body)
	}
	r = rawUpgrade(t, addr, "/ws", "", "Origin", "https://evil.example")
	if r.status != 403 || !strings.Contains(r.body, `"error":"origin_refused"`) {
		t.Errorf("refused origin = %d %q, want 403 origin_refused", r.status, r.body)
	}
	_ = s
}

// Past recorder.LiveRoutinePerSecond a second, successful tasks and
// routine events are counted in "sampled" frames instead of sent; every
// failure and annotation still arrives, and what was sent plus what was
// counted is everything.
func TestWSSamplesRoutineItems(t *testing.T) {
	t.Parallel()
	s, addr := wsTestServer(t, wsLimits{maxConns: 4, subBuffer: 4096, writeTimeout: wsWait, pingEvery: time.Hour})
	ws := wsDial(t, addr, "/ws", "http://localhost")
	subscribe(t, ws, `{"subscribe":["tasks","events"]}`)
	const ok, failed = 1000, 10
	for i := range ok {
		s.rec.Event(event.Event{Type: event.TypeTaskReceived, TaskID: fmt.Sprint("ok-", i), Payload: json.RawMessage(`{"source":"http"}`)})
		s.rec.Task(event.TaskRow{TaskID: fmt.Sprint("ok-", i), Source: "http", Status: "ok", Attempts: 1})
		if i%(ok/failed) == 0 {
			s.rec.Event(event.Event{Type: event.TypeAnnotation, Kind: "note", TaskID: fmt.Sprint("ok-", i), Payload: json.RawMessage(`{}`)})
			s.rec.Task(event.TaskRow{TaskID: fmt.Sprint("bad-", i), Source: "http", Status: "failed", Attempts: 1})
		}
	}
	var gotOK, gotFailed, gotReceived, gotNotes, sampledTasks, sampledEvents int
	readUntil(t, ws, func(f testFrame) bool {
		switch f.Stream {
		case "tasks":
			var row event.TaskRow
			json.Unmarshal(f.Data, &row)
			if row.Status == "ok" {
				gotOK++
			} else {
				gotFailed++
			}
		case "events":
			// Only this test's tasks: the worker's own events (its
			// state, config snapshot) may be recorded after the
			// subscription when the stack starts slowly.
			if e := decodeEvent(t, f); !strings.HasPrefix(e.TaskID, "ok-") {
				break
			} else if e.Type == event.TypeAnnotation {
				gotNotes++
			} else {
				gotReceived++
			}
		case "sampled":
			var d struct{ Tasks, Events, PerSecond int }
			json.Unmarshal(f.Data, &d)
			sampledTasks, sampledEvents = sampledTasks+d.Tasks, sampledEvents+d.Events
		case "dropped":
			t.Fatalf("dropped frame %s: the buffer was meant to hold everything sent", f.Data)
		}
		return gotOK+sampledTasks == ok && gotReceived+sampledEvents == ok && gotFailed == failed && gotNotes == failed
	})
	if gotOK > 2*recorder.LiveRoutinePerSecond || gotReceived > 2*recorder.LiveRoutinePerSecond {
		t.Errorf("sent %d ok task rows and %d routine events, want at most %d each (one budget a second)", gotOK, gotReceived, recorder.LiveRoutinePerSecond)
	}
	t.Logf("sent %d ok rows, %d routine events; sampled %d and %d", gotOK, gotReceived, sampledTasks, sampledEvents)
}

// shedCount is svc_ui_ws_shed_total's value for reason.
func shedCount(h *wsHub, reason string) uint64 {
	return uint64(testutil.ToFloat64(h.shed.WithLabelValues(reason)))
}
