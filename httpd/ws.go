package httpd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/net/websocket"

	"svc/recorder"
	"svc/worker/event"
)

// Limits of /ws (docs/api.md, "Live stream: GET /ws").
const (
	wsMaxConns      = 256                    // concurrent sockets; more answer 503 before the upgrade
	wsMaxFrameBytes = 64 << 10               // largest client message; larger ones are discarded unread
	wsSubBuffer     = 4096                   // items of each kind a subscription queues between two batches
	wsFlushInterval = 100 * time.Millisecond // at most one batch frame per interval
	wsWriteTimeout  = 10 * time.Second       // a frame not taken within this sheds the socket
	wsSockBacklog   = 4 << 20                // bytes waiting for one socket; more shed it
	wsPendingBudget = 32 << 20               // bytes waiting for all sockets; more shed the furthest behind
	wsMaxGroups     = 32                     // distinct subscriptions across all sockets
	wsPingInterval  = 30 * time.Second       // keeps proxies from reaping idle sockets
	wsCloseTimeout  = time.Second            // for the close frame, and the frame in flight of a shed socket
)

// wsLimits are the per-endpoint knobs; tests shorten them. Zero
// sockBacklog, budget, maxGroups and closeTimeout take the defaults.
type wsLimits struct {
	maxConns, subBuffer                 int
	writeTimeout, pingEvery, flushEvery time.Duration
	sockBacklog, budget                 int64
	maxGroups                           int
	closeTimeout                        time.Duration
}

func defaultWSLimits() wsLimits {
	return wsLimits{maxConns: wsMaxConns, subBuffer: wsSubBuffer, writeTimeout: wsWriteTimeout, pingEvery: wsPingInterval, flushEvery: wsFlushInterval,
		sockBacklog: wsSockBacklog, budget: wsPendingBudget, maxGroups: wsMaxGroups, closeTimeout: wsCloseTimeout}
}

// wsEndpoint serves GET /ws, the live streams (docs/api.md, "Live stream:
// GET /ws"). It bounds the open sockets and closes them when the server
// shuts down (http.Server.Shutdown does not touch hijacked connections).
//
// Access: the token gate runs on the upgrade request, so a socket without
// the token gets 401 and is never upgraded. The token is not accepted as a
// subprotocol (the echoed subprotocol would copy the secret into the
// response); the endpoint selects none. The Origin is checked on every
// handshake (originCheck), which x/net/websocket's default Handler does
// not do, hence websocket.Server with our own Handshake.
type wsEndpoint struct {
	s   *UIServer
	lim wsLimits
	log *slog.Logger
	hub *wsHub

	mu     sync.Mutex
	active int                                   // slots taken, upgrading sockets included
	conns  map[*context.CancelCauseFunc]struct{} // open sockets' cancel functions
	closed bool                                  // server shut down
}

func (s *UIServer) newWSEndpoint(lim wsLimits) *wsEndpoint {
	def := defaultWSLimits()
	orDefault(&lim.sockBacklog, def.sockBacklog)
	orDefault(&lim.budget, def.budget)
	orDefault(&lim.maxGroups, def.maxGroups)
	orDefault(&lim.closeTimeout, def.closeTimeout)
	e := &wsEndpoint{s: s, lim: lim, log: s.log.With("component", "ws"), conns: map[*context.CancelCauseFunc]struct{}{}}
	if s.rec != nil {
		e.hub = newWSHub(s.rec, lim, e.log)
		if reg, ok := s.gather.(prometheus.Registerer); ok { // the worker's registry
			e.hub.register(reg)
		}
	}
	return e
}

func orDefault[T int | int64 | time.Duration](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}

var (
	errWSShutdown   = errors.New("server shutting down")
	errWSClientGone = errors.New("client closed the socket")
)

// ServeHTTP checks what can be checked before the upgrade, then hands the
// request to websocket.Server.
func (e *wsEndpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if e.hub == nil {
		writeError(w, http.StatusServiceUnavailable, "recorder_unavailable", "no flight recorder: live streams are off")
		return
	}
	if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		w.Header().Set("Upgrade", "websocket")
		writeError(w, http.StatusUpgradeRequired, "upgrade_required",
			`GET /ws is a WebSocket: connect with "Upgrade: websocket" and send {"subscribe":["tasks","events","state"]}`)
		return
	}
	if ok, reason := e.s.originCheck(r); !ok {
		e.logRefused(r, reason)
		writeError(w, http.StatusForbidden, "origin_refused", reason)
		return
	}
	if code, detail := e.acquire(); code != "" {
		w.Header().Set("Retry-After", "5")
		writeError(w, http.StatusServiceUnavailable, code, detail)
		return
	}
	defer e.release()
	// The server's deadlines outlive the hijack; a socket sets its own per frame.
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{})
	_ = rc.SetWriteDeadline(time.Now().Add(e.lim.writeTimeout))
	websocket.Server{Handshake: e.handshake, Handler: e.serve}.ServeHTTP(w, r)
}

// handshake applies the Origin rule and declines every subprotocol.
func (e *wsEndpoint) handshake(cfg *websocket.Config, r *http.Request) error {
	if ok, reason := e.s.originCheck(r); !ok { // checked before the upgrade too
		e.logRefused(r, reason)
		return errors.New(reason)
	}
	cfg.Origin, _ = websocket.Origin(cfg, r)
	cfg.Protocol = nil
	return nil
}

func (e *wsEndpoint) logRefused(r *http.Request, reason string) {
	e.log.Info("ws_origin_refused", "origin", cut(r.Header.Get("Origin"), 100), "host", r.Host, "remote", r.RemoteAddr, "reason", reason)
}

// acquire takes a connection slot, or returns the error code and detail.
func (e *wsEndpoint) acquire() (code, detail string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case e.closed:
		return "shutting_down", "the worker is shutting down"
	case e.active >= e.lim.maxConns:
		return "too_many_connections", "at most " + strconv.Itoa(e.lim.maxConns) + " /ws connections at once"
	}
	e.active++
	return "", ""
}

func (e *wsEndpoint) release() {
	e.mu.Lock()
	e.active--
	e.mu.Unlock()
}

// track registers an open socket; false when the server already shut down.
func (e *wsEndpoint) track(cancel *context.CancelCauseFunc) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return false
	}
	e.conns[cancel] = struct{}{}
	return true
}

func (e *wsEndpoint) untrack(cancel *context.CancelCauseFunc) {
	e.mu.Lock()
	delete(e.conns, cancel)
	e.mu.Unlock()
}

// closeAll ends every open socket and refuses new ones; it runs as the
// http.Server's shutdown hook (NewUIServer).
func (e *wsEndpoint) closeAll() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.closed = true
	for cancel := range e.conns {
		(*cancel)(errWSShutdown)
	}
}

// wsFrame is every server-to-client frame: one JSON text message.
type wsFrame struct {
	Stream string `json:"stream"`
	Data   any    `json:"data,omitempty"`
}

// wsSubscribe is the client's message. A nil Subscribe (key missing) is an
// error, an empty one unsubscribes from everything.
type wsSubscribe struct {
	Subscribe  []string `json:"subscribe"`
	EventTypes []string `json:"event_types"`
}

// wsFilter is the active subscription; the zero value sends nothing.
type wsFilter struct {
	tasks, events, state bool
	types                map[string]bool // nil: every event type
}

func (f wsFilter) any() bool { return f.tasks || f.events || f.state }

func parseSubscribe(msg []byte) (wsFilter, *wsSubscribe, error) {
	var req wsSubscribe
	if err := json.Unmarshal(msg, &req); err != nil {
		return wsFilter{}, nil, fmt.Errorf(`expected {"subscribe":[...],"event_types":[...]}: %w`, err)
	}
	if req.Subscribe == nil {
		return wsFilter{}, nil, errors.New(`missing "subscribe": send {"subscribe":["tasks","events","state"]}`)
	}
	var f wsFilter
	streams := map[string]*bool{"tasks": &f.tasks, "events": &f.events, "state": &f.state}
	for _, name := range req.Subscribe {
		on, ok := streams[name]
		if !ok {
			return wsFilter{}, nil, fmt.Errorf("unknown stream %q; streams are tasks, events, state", name)
		}
		*on = true
	}
	if len(req.EventTypes) > 0 {
		f.types = make(map[string]bool, len(req.EventTypes))
		for _, t := range req.EventTypes {
			f.types[t] = true
		}
	}
	return f, &req, nil
}

func wsError(code, detail string) *wsFrame {
	return &wsFrame{Stream: "error", Data: ErrorBody{Error: code, Detail: detail}}
}

// serve runs one socket (the frames: docs/api.md, "Live stream: GET /ws").
// One goroutine reads, this one writes what the hub queues: the recorder
// never waits for a socket, and one that falls behind is shed (wsHub).
func (e *wsEndpoint) serve(ws *websocket.Conn) {
	ws.MaxPayloadBytes = wsMaxFrameBytes
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	if !e.track(&cancel) {
		_ = ws.Close()
		return
	}
	defer e.untrack(&cancel)
	s := e.hub.add(ws)
	defer e.hub.remove(s)

	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		e.readLoop(ctx, cancel, s)
	}()
	err := e.writeLoop(ctx, s)
	var shed *wsShedError
	switch {
	case errors.As(err, &shed): // told, then closed when serve returns
		_ = ws.SetWriteDeadline(time.Now().Add(e.lim.closeTimeout))
		if e.writeNow(ws, shed.frame()) == nil {
			ws.PayloadType = websocket.CloseFrame
			_, _ = ws.Write(shed.closeFrame())
		}
		_ = ws.SetReadDeadline(time.Now()) // ends the reader's Receive
	default:
		if err == nil {
			err = context.Cause(ctx)
		}
		_ = ws.SetWriteDeadline(time.Now().Add(e.lim.closeTimeout))
		_ = ws.Close() // also ends the reader's Receive
	}
	<-readDone
	e.log.Debug("ws_closed", "remote", s.remote, "reason", err.Error(), "dropped", s.dropped.Load())
}

// wsShedError ends a socket that fell behind.
type wsShedError struct{ reason string }

func (e *wsShedError) Error() string { return "shed: " + e.reason }

// frame is the last data frame of a shed socket.
func (e *wsShedError) frame() []byte {
	b, _ := json.Marshal(wsError("too_slow", "this socket fell behind the live streams ("+e.reason+
		") and is closed; reconnect and subscribe again"))
	return b
}

// closeFrame is its close frame's payload: 1008 (policy violation), reason.
func (e *wsShedError) closeFrame() []byte {
	return append([]byte{0x03, 0xf0}, "too slow: "+e.reason...)
}

// readLoop applies client messages until the socket fails.
func (e *wsEndpoint) readLoop(ctx context.Context, cancel context.CancelCauseFunc, s *wsSock) {
	for {
		var msg []byte
		err := websocket.Message.Receive(s.ws, &msg)
		switch {
		case errors.Is(err, websocket.ErrFrameTooLarge):
			s.push(e.hub.personal(*wsError("frame_too_large", "messages are limited to "+strconv.Itoa(wsMaxFrameBytes)+" bytes")))
		case err != nil:
			if errors.Is(err, io.EOF) {
				err = errWSClientGone
			}
			cancel(err)
			return
		default:
			f, req, perr := parseSubscribe(msg)
			if perr != nil {
				s.push(e.hub.personal(*wsError("bad_request", perr.Error())))
			} else {
				e.hub.setFilter(s, f, req)
			}
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// writeLoop writes what the hub queues for s, and a ping every pingEvery,
// until ctx ends (nil), a write fails (its error) or s is shed
// (*wsShedError).
func (e *wsEndpoint) writeLoop(ctx context.Context, s *wsSock) error {
	ping := time.NewTicker(e.lim.pingEvery)
	defer ping.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-s.ready:
		case <-ping.C:
			if err := e.write(s.ws, wsPing); err != nil {
				return e.writeFailed(s, err)
			}
		}
		for {
			o, shed := s.next()
			if shed != "" {
				return &wsShedError{shed}
			}
			if o == nil {
				break
			}
			err := e.write(s.ws, o.b)
			e.hub.release(o)
			if err != nil {
				return e.writeFailed(s, err)
			}
		}
	}
}

var wsPing = []byte(`{"stream":"ping"}`)

// writeFailed sheds s when its client did not take a frame in time.
func (e *wsEndpoint) writeFailed(s *wsSock, err error) error {
	if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
		s.shedFor(shedWriteTimeout)
	}
	return err
}

// wsSampled is the data of a "sampled" frame.
type wsSampled struct {
	Tasks     uint64        `json:"tasks"`
	Events    uint64        `json:"events"`
	PerSecond int           `json:"per_second"`
	Sent      wsRoutineSent `json:"sent"`
}

type wsRoutineSent struct {
	Tasks  uint64 `json:"tasks"`
	Events uint64 `json:"events"`
}

// wsBatch builds one batch frame from the items a subscription queued,
// reusing its buffers from batch to batch.
type wsBatch struct {
	buf    bytes.Buffer
	enc    *json.Encoder
	n      int // frames in buf
	events []event.Event
	tasks  []event.TaskRow
}

// take adds everything sub queued that f wants: events first (a state
// event on "events" and "state" when both are subscribed), then task rows.
func (b *wsBatch) take(sub *recorder.Subscription, f wsFilter) error {
	events, tasks, _ := sub.Take(b.events, b.tasks)
	defer func() {
		clear(events) // drop the payloads' references until the slots are reused
		clear(tasks)
		b.events, b.tasks = events[:0], tasks[:0]
	}()
	for i := range events {
		ev := &events[i]
		if f.events && (f.types == nil || f.types[ev.Type]) {
			if err := b.add("events", ev); err != nil {
				return err
			}
		}
		if f.state && ev.Type == event.TypeState {
			if err := b.add("state", ev); err != nil {
				return err
			}
		}
	}
	for i := range tasks {
		if !f.tasks {
			break
		}
		if err := b.add("tasks", &tasks[i]); err != nil {
			return err
		}
	}
	return nil
}

// add appends {"stream":stream,"data":v} to the batch.
func (b *wsBatch) add(stream string, v any) error {
	if b.n == 0 {
		b.buf.Reset()
		b.buf.WriteString(`{"stream":"batch","data":[`)
		if b.enc == nil {
			b.enc = json.NewEncoder(&b.buf)
		}
	} else {
		b.buf.WriteByte(',')
	}
	b.buf.WriteString(`{"stream":"`)
	b.buf.WriteString(stream)
	b.buf.WriteString(`","data":`)
	if ev, ok := v.(*event.Event); ok { // by hand: at full load most items are events
		out, err := ev.AppendJSON(b.buf.AvailableBuffer())
		if err != nil {
			return fmt.Errorf("encode %s frame: %w", stream, err)
		}
		b.buf.Write(out)
	} else if err := b.enc.Encode(v); err != nil { // Encode writes nothing on error; its newline is JSON whitespace
		return fmt.Errorf("encode %s frame: %w", stream, err)
	}
	b.buf.WriteByte('}')
	b.n++
	return nil
}

// reset drops a batch half built.
func (b *wsBatch) reset() { b.n = 0 }

// frame closes the batch; the bytes are valid until the next add.
func (b *wsBatch) frame() []byte {
	b.buf.WriteString("]}")
	b.n = 0
	return b.buf.Bytes()
}

// write sends b as one text frame under the write deadline.
func (e *wsEndpoint) write(ws *websocket.Conn, b []byte) error {
	if err := ws.SetWriteDeadline(time.Now().Add(e.lim.writeTimeout)); err != nil {
		return err
	}
	return e.writeNow(ws, b)
}

// writeNow sends b as one text frame under the deadline already set.
func (e *wsEndpoint) writeNow(ws *websocket.Conn, b []byte) error {
	ws.PayloadType = websocket.TextFrame
	_, err := ws.Write(b)
	return err
}
