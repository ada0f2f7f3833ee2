package httpd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/websocket"

	"svc/recorder"
)

// Limits of /ws.
const (
	wsMaxConns      = 256              // concurrent sockets; more answer 503 before the upgrade
	wsMaxFrameBytes = 64 << 10         // largest client message; larger ones are discarded unread
	wsSubBuffer     = 256              // recorder subscription buffer per stream
	wsWriteTimeout  = 10 * time.Second // a frame the client does not take within this closes the socket
	wsPingInterval  = 30 * time.Second // {"stream":"ping"}: keeps proxies from reaping idle sockets; a vanished peer fails a write once TCP gives up
	wsCloseTimeout  = time.Second      // budget for the close frame
)

// wsLimits are the per-endpoint knobs; tests shorten them.
type wsLimits struct {
	maxConns, subBuffer     int
	writeTimeout, pingEvery time.Duration
}

func defaultWSLimits() wsLimits {
	return wsLimits{maxConns: wsMaxConns, subBuffer: wsSubBuffer, writeTimeout: wsWriteTimeout, pingEvery: wsPingInterval}
}

// websocket serves GET /ws, the live task, event and state streams (frames
// described at wsEndpoint.serve).
//
// Access: the token gate (requireToken) runs on the HTTP upgrade request
// itself, before any handshake byte is written, so "the token is validated
// inside the handshake": a socket without the token is
// answered 401 and never upgraded. Browsers cannot set headers on a
// WebSocket, so pages pass ?token=; non-browser clients may use
// Authorization: Bearer. The token is deliberately not accepted as a
// "bearer.<token>" subprotocol: the UI already carries it in ?token= for
// navigation and module imports, a second channel would need a second gate
// in auth.go, and the echoed subprotocol would copy the secret into the
// response. The endpoint speaks no subprotocol and selects none.
//
// Origin: checked on every handshake by originCheck (origin.go), token or
// not; x/net/websocket's default Handler does not, hence websocket.Server
// with our own Handshake. A refused Origin fails the handshake with 403.
func (s *UIServer) websocket() http.Handler { return s.newWSEndpoint(defaultWSLimits()) }

// wsEndpoint owns the open sockets: it bounds their number and closes them
// when the server shuts down (http.Server.Shutdown does not touch hijacked
// connections).
type wsEndpoint struct {
	s        *UIServer
	lim      wsLimits
	log      *slog.Logger
	hookOnce sync.Once

	mu     sync.Mutex
	active int                                   // slots taken, upgrading sockets included
	conns  map[*context.CancelCauseFunc]struct{} // open sockets' cancel functions
	closed bool                                  // server shut down
}

func (s *UIServer) newWSEndpoint(lim wsLimits) *wsEndpoint {
	return &wsEndpoint{s: s, lim: lim, log: s.log.With("component", "ws"), conns: map[*context.CancelCauseFunc]struct{}{}}
}

var (
	errWSShutdown   = errors.New("server shutting down")
	errWSClientGone = errors.New("client closed the socket")
)

// ServeHTTP checks what can be checked before the upgrade, then hands the
// request to websocket.Server.
func (e *wsEndpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// The UI server's routes are built before its http.Server exists, so
	// the shutdown hook is registered on first use.
	e.hookOnce.Do(func() {
		if srv, ok := r.Context().Value(http.ServerContextKey).(*http.Server); ok {
			srv.RegisterOnShutdown(e.closeAll)
		}
	})
	if e.s.rec == nil {
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
	// The server's ReadTimeout and WriteTimeout are request deadlines that
	// outlive the hijack; a socket sets its own per frame.
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

// logRefused logs a refused handshake once, the origin as sent (cut).
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
// http.Server's shutdown hook.
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

// wsSubscribe is the client's message; resending it replaces the
// subscription. A nil Subscribe (key missing) is an error, an empty one
// unsubscribes from everything.
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
	for _, name := range req.Subscribe {
		switch name {
		case "tasks":
			f.tasks = true
		case "events":
			f.events = true
		case "state":
			f.state = true
		default:
			return wsFilter{}, nil, fmt.Errorf("unknown stream %q; streams are tasks, events, state", name)
		}
	}
	if len(req.EventTypes) > 0 {
		f.types = make(map[string]bool, len(req.EventTypes))
		for _, t := range req.EventTypes {
			f.types[t] = true
		}
	}
	return f, &req, nil
}

// wsControl carries a client message from the reader to the writer:
// exactly one field is set.
type wsControl struct {
	filter *wsFilter
	frame  *wsFrame // the subscription ack or an error to report
}

func wsError(code, detail string) *wsFrame {
	return &wsFrame{Stream: "error", Data: ErrorBody{Error: code, Detail: detail}}
}

// serve runs one socket. The client sends wsSubscribe messages; the server
// answers each with {"stream":"subscribed","data":<the message>} or
// {"stream":"error","data":{"error","detail"}} and then sends
//
//	{"stream":"tasks","data":<recorder.TaskRow>}
//	{"stream":"events","data":<recorder.Event>}   (only event_types, when given)
//	{"stream":"state","data":<recorder.Event of type state>}
//	{"stream":"dropped","data":{"count":n,"total":n}}   items this socket missed
//	{"stream":"sampled","data":{"tasks":n,"events":n,"per_second":n}}
//	                                                   routine items not sent in the last second
//	{"stream":"ping"}                                  every 30 s
//
// Routine items (task rows and lifecycle events of successful tasks) are
// sent at most recorder.LiveRoutinePerSecond a second each; failures,
// annotations, DLQ records and worker events always.
// A state event goes to both "events" and "state" when both are subscribed.
// A message over 64 KiB is discarded unread and answered with an error; the
// socket stays open. One goroutine reads, this one writes: the recorder
// never waits for a socket (its subscription drops and counts), and a
// client that does not take a frame within the write timeout is
// disconnected rather than buffered for.
func (e *wsEndpoint) serve(ws *websocket.Conn) {
	ws.MaxPayloadBytes = wsMaxFrameBytes
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	if !e.track(&cancel) {
		_ = ws.Close()
		return
	}
	defer e.untrack(&cancel)
	sub := e.s.rec.Subscribe(e.lim.subBuffer)
	defer sub.Close()

	ctl := make(chan wsControl, 4)
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		e.readLoop(ctx, cancel, ws, ctl)
	}()
	err := e.writeLoop(ctx, ws, sub, ctl)
	if err == nil {
		err = context.Cause(ctx)
	}
	_ = ws.SetWriteDeadline(time.Now().Add(wsCloseTimeout))
	_ = ws.Close() // also ends the reader's Receive
	<-readDone
	e.log.Debug("ws_closed", "remote", ws.Request().RemoteAddr, "reason", err.Error(), "dropped", sub.Dropped())
}

// readLoop turns client messages into controls until the socket fails.
func (e *wsEndpoint) readLoop(ctx context.Context, cancel context.CancelCauseFunc, ws *websocket.Conn, ctl chan<- wsControl) {
	for {
		var msg []byte
		var c wsControl
		err := websocket.Message.Receive(ws, &msg)
		switch {
		case errors.Is(err, websocket.ErrFrameTooLarge):
			c.frame = wsError("frame_too_large", "messages are limited to "+strconv.Itoa(wsMaxFrameBytes)+" bytes")
		case err != nil:
			if errors.Is(err, io.EOF) {
				err = errWSClientGone
			}
			cancel(err)
			return
		default:
			f, req, perr := parseSubscribe(msg)
			if perr != nil {
				c.frame = wsError("bad_request", perr.Error())
			} else {
				c.filter = &f
				select {
				case ctl <- c:
				case <-ctx.Done():
					return
				}
				c = wsControl{frame: &wsFrame{Stream: "subscribed", Data: req}}
			}
		}
		select {
		case ctl <- c:
		case <-ctx.Done():
			return
		}
	}
}

// writeLoop sends frames until ctx ends (nil) or a write fails (its error).
// A new filter applies to what is published after the client sent it:
// items already queued are sent, or not, under the filter they were
// published under.
func (e *wsEndpoint) writeLoop(ctx context.Context, ws *websocket.Conn, sub *recorder.Subscription, ctl <-chan wsControl) error {
	ping := time.NewTicker(e.lim.pingEvery)
	defer ping.Stop()
	sampleTick := time.NewTicker(time.Second)
	defer sampleTick.Stop()
	var f wsFilter
	var reported uint64
	var sampledTasks, sampledEvents uint64
	sub.Filter(func(*recorder.Event) bool { return false }, false) // nothing until the first subscribe
	event := func(ev recorder.Event) error {
		if f.events && (f.types == nil || f.types[ev.Type]) {
			if err := e.send(ws, wsFrame{Stream: "events", Data: ev}); err != nil {
				return err
			}
		}
		if f.state && ev.Type == recorder.TypeState {
			return e.send(ws, wsFrame{Stream: "state", Data: ev})
		}
		return nil
	}
	task := func(t recorder.TaskRow) error {
		if f.tasks {
			return e.send(ws, wsFrame{Stream: "tasks", Data: t})
		}
		return nil
	}
	for {
		var err error
		select {
		case <-ctx.Done():
			return nil
		case c := <-ctl:
			if c.filter != nil {
				err = drainQueued(sub, event, task)
				f = *c.filter
				nf := f
				sub.Filter(func(ev *recorder.Event) bool {
					return nf.events && (nf.types == nil || nf.types[ev.Type]) || nf.state && ev.Type == recorder.TypeState
				}, nf.tasks)
			} else {
				err = e.send(ws, *c.frame)
			}
		case ev, ok := <-sub.Events():
			if !ok {
				return errors.New("subscription closed")
			}
			err = event(ev)
		case t, ok := <-sub.Tasks():
			if !ok {
				return errors.New("subscription closed")
			}
			err = task(t)
		case <-ping.C:
			err = e.send(ws, wsFrame{Stream: "ping"})
		case <-sampleTick.C:
			// Routine items over the subscriber's budget, once a second.
			if t, ev := sub.Sampled(); f.any() && (t > sampledTasks || ev > sampledEvents) {
				err = e.send(ws, wsFrame{Stream: "sampled", Data: map[string]uint64{
					"tasks": t - sampledTasks, "events": ev - sampledEvents, "per_second": recorder.LiveRoutinePerSecond}})
				sampledTasks, sampledEvents = t, ev
			}
		}
		if d := sub.Dropped(); err == nil && d > reported {
			if f.any() {
				err = e.send(ws, wsFrame{Stream: "dropped", Data: map[string]uint64{"count": d - reported, "total": d}})
			}
			reported = d
		}
		if err != nil {
			return err
		}
	}
}

// drainQueued hands over the items queued on sub right now, no more (the
// recorder keeps publishing meanwhile).
func drainQueued(sub *recorder.Subscription, event func(recorder.Event) error, task func(recorder.TaskRow) error) error {
	for n := len(sub.Events()); n > 0; n-- {
		if ev, ok := <-sub.Events(); !ok {
			return nil
		} else if err := event(ev); err != nil {
			return err
		}
	}
	for n := len(sub.Tasks()); n > 0; n-- {
		if t, ok := <-sub.Tasks(); !ok {
			return nil
		} else if err := task(t); err != nil {
			return err
		}
	}
	return nil
}

// send writes one text frame under the write deadline.
func (e *wsEndpoint) send(ws *websocket.Conn, f wsFrame) error {
	b, err := json.Marshal(f)
	if err != nil {
		return fmt.Errorf("encode %s frame: %w", f.Stream, err)
	}
	if err := ws.SetWriteDeadline(time.Now().Add(e.lim.writeTimeout)); err != nil {
		return err
	}
	return websocket.Message.Send(ws, string(b))
}
