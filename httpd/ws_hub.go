package httpd

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/net/websocket"

	"svc/recorder"
)

// wsHub fans the live streams out to the /ws sockets so that all of them
// together cost the pipeline a bounded amount. Sockets with the same
// subscription share one wsGroup: one recorder subscription and one
// encoding of each batch. What waits to be written is accounted in bytes
// (a frame shared by sockets once); a socket over lim.sockBacklog, not
// taking a frame within lim.writeTimeout, or furthest behind while all
// pass lim.budget is shed: its queue is released at once and the client
// told (too_slow, close status 1008).
//
// Lock order: hub.mu, then a group's mu, then a socket's mu.
type wsHub struct {
	rec *recorder.Recorder
	lim wsLimits
	log *slog.Logger

	mu     sync.Mutex          // guards groups, socks and every socket's group
	groups map[string]*wsGroup // by wsFilter.key
	socks  map[*wsSock]struct{}

	held      atomic.Int64           // bytes of frames queued for or being written to sockets, each frame once
	seq       atomic.Uint64          // frames made
	shed      *prometheus.CounterVec // sockets shed, by reason
	shedTotal atomic.Uint64          // sockets shed, all reasons
	conns     atomic.Int64           // sockets served

	logMu    sync.Mutex
	lastLog  time.Time
	unlogged int // sheds since the last ws_shed line
}

// Why a socket is shed (the reason label of svc_ui_ws_shed_total).
const (
	shedBacklog = iota
	shedBudget
	shedWriteTimeout
)

var wsShedReasons = [...]string{"backlog", "budget", "write_timeout"}

// wsShedLogEvery spaces the ws_shed log lines: a herd of stuck sockets
// logs one line, with how many were shed meanwhile.
const wsShedLogEvery = 10 * time.Second

func newWSHub(rec *recorder.Recorder, lim wsLimits, log *slog.Logger) *wsHub {
	shed := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "svc_ui_ws_shed_total",
		Help: "/ws sockets closed for falling behind, by reason: backlog (own unsent frames over 4 MiB), budget (all sockets' frames over 32 MiB, furthest behind first), write_timeout (a frame not taken within 10 s).",
	}, []string{"reason"})
	for _, r := range wsShedReasons {
		shed.WithLabelValues(r)
	}
	return &wsHub{rec: rec, lim: lim, log: log, groups: map[string]*wsGroup{}, socks: map[*wsSock]struct{}{}, shed: shed}
}

// register exports the hub's series; a registry that has them already
// keeps the first.
func (h *wsHub) register(reg prometheus.Registerer) {
	cs := []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "svc_ui_ws_pending_bytes",
			Help: "Bytes of /ws frames queued for or being written to sockets, a frame shared by sockets counted once."},
			func() float64 { return float64(h.held.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "svc_ui_ws_connections", Help: "Open /ws sockets."},
			func() float64 { return float64(h.conns.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "svc_ui_ws_subscriptions",
			Help: "Distinct /ws subscriptions: each is encoded once for all its sockets."},
			func() float64 { return float64(h.subscriptions()) }),
		h.shed,
	}
	for _, c := range cs {
		_ = reg.Register(c) // only ever AlreadyRegisteredError: the names are this file's
	}
}

func (h *wsHub) subscriptions() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.groups)
}

// wsOut is one frame on its way to sockets, shared by a group's members or
// one socket's own. Its bytes never change once made.
type wsOut struct {
	b    []byte
	seq  uint64       // order made: a socket whose oldest queued frame has the lowest is furthest behind
	refs atomic.Int32 // sockets that still have it queued or in flight
}

// newOut accounts b, to be handed to refs sockets (each releases one
// reference once it wrote or dropped it).
func (h *wsHub) newOut(b []byte, refs int) *wsOut {
	o := &wsOut{b: b, seq: h.seq.Add(1)}
	o.refs.Store(int32(refs))
	h.held.Add(int64(len(b)))
	return o
}

func (h *wsHub) release(o *wsOut) {
	if o.refs.Add(-1) == 0 {
		h.held.Add(-int64(len(o.b)))
	}
}

// personal makes a frame for one socket.
func (h *wsHub) personal(f wsFrame) *wsOut {
	b, err := json.Marshal(f)
	if err != nil { // the frames made here are plain data
		b = []byte(`{"stream":"error","data":{"error":"internal","detail":"frame not encoded"}}`)
	}
	return h.newOut(b, 1)
}

// wsSock is one socket's side of the hub: the frames waiting for its writer.
type wsSock struct {
	hub    *wsHub
	ws     *websocket.Conn
	remote string
	ready  chan struct{} // one signal when frames were queued

	group *wsGroup // guarded by hub.mu

	mu      sync.Mutex
	queue   []*wsOut // frames to write, queue[head:]
	head    int
	backlog int64  // bytes of queue[head:]
	shed    string // why it was shed; "" while it was not
	closed  bool

	// Guarded by the group's mu while a member, by hub.mu otherwise.
	base    [4]uint64     // the group's sampled and sent counts already reported to this socket
	dropped atomic.Uint64 // items its subscriptions missed (a full recorder queue)
}

func (h *wsHub) add(ws *websocket.Conn) *wsSock {
	s := &wsSock{hub: h, ws: ws, remote: ws.Request().RemoteAddr, ready: make(chan struct{}, 1)}
	h.mu.Lock()
	h.socks[s] = struct{}{}
	h.mu.Unlock()
	h.conns.Add(1)
	return s
}

// remove stops serving s: it leaves its group and its queue is released.
func (h *wsHub) remove(s *wsSock) {
	h.mu.Lock()
	if g := s.group; g != nil {
		h.leave(s, g, false)
	}
	delete(h.socks, s)
	h.mu.Unlock()
	h.conns.Add(-1)
	s.mu.Lock()
	s.closed = true
	s.dropQueue()
	s.mu.Unlock()
}

// push queues o for s, or releases it when s is shed or closed. A frame
// that would take the backlog over lim.sockBacklog sheds s instead,
// unless the queue is empty: one frame, however large, always fits.
func (s *wsSock) push(o *wsOut) {
	s.mu.Lock()
	if s.closed || s.shed != "" {
		s.mu.Unlock()
		s.hub.release(o)
		return
	}
	if s.head < len(s.queue) && s.backlog+int64(len(o.b)) > s.hub.lim.sockBacklog {
		s.mu.Unlock()
		s.hub.release(o)
		s.shedFor(shedBacklog)
		return
	}
	if s.head > 0 && s.head >= len(s.queue)/2 { // a writer always one behind never empties the queue
		n := copy(s.queue, s.queue[s.head:])
		clear(s.queue[n:])
		s.queue, s.head = s.queue[:n], 0
	}
	s.queue = append(s.queue, o)
	s.backlog += int64(len(o.b))
	s.mu.Unlock()
	select {
	case s.ready <- struct{}{}:
	default:
	}
}

// next returns the frame to write, nil when none is queued, or the reason
// s was shed.
func (s *wsSock) next() (*wsOut, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.shed != "" {
		return nil, s.shed
	}
	if s.head == len(s.queue) {
		return nil, ""
	}
	o := s.queue[s.head]
	s.queue[s.head] = nil
	s.head++
	s.backlog -= int64(len(o.b))
	if s.head == len(s.queue) {
		s.queue, s.head = s.queue[:0], 0
	}
	return o, ""
}

// dropQueue releases every queued frame (s.mu held).
func (s *wsSock) dropQueue() {
	for i := s.head; i < len(s.queue); i++ {
		s.hub.release(s.queue[i])
		s.queue[i] = nil
	}
	s.queue, s.head, s.backlog = nil, 0, 0
}

// shedFor sheds s: its queue is released now; its writer finishes the
// frame in flight (within lim.closeTimeout), tells the client and closes.
func (s *wsSock) shedFor(reason int) {
	s.mu.Lock()
	if s.closed || s.shed != "" {
		s.mu.Unlock()
		return
	}
	backlog := s.backlog
	s.shed = wsShedReasons[reason]
	s.dropQueue()
	s.mu.Unlock()
	if reason != shedWriteTimeout {
		_ = s.ws.SetWriteDeadline(time.Now().Add(s.hub.lim.closeTimeout))
	}
	select {
	case s.ready <- struct{}{}:
	default:
	}
	s.hub.shed.WithLabelValues(wsShedReasons[reason]).Inc()
	s.hub.shedTotal.Add(1)
	s.hub.logShed(s, wsShedReasons[reason], backlog)
}

// logShed logs a shed socket, at most one line per wsShedLogEvery.
func (h *wsHub) logShed(s *wsSock, reason string, backlog int64) {
	h.logMu.Lock()
	now := time.Now()
	if !h.lastLog.IsZero() && now.Sub(h.lastLog) < wsShedLogEvery {
		h.unlogged++
		h.logMu.Unlock()
		return
	}
	more := h.unlogged
	h.lastLog, h.unlogged = now, 0
	h.logMu.Unlock()
	h.log.Warn("ws_shed", "remote", s.remote, "reason", reason, "backlog_bytes", backlog,
		"pending_bytes", h.held.Load(), "shed_since_last_line", more, "shed_total", h.shedTotal.Load())
}

// enforceBudget sheds the sockets furthest behind (oldest queued frame)
// while the frames held for all sockets pass lim.budget. Only sockets with
// two or more frames queued are candidates: one that keeps up is never
// shed for the others.
func (h *wsHub) enforceBudget() {
	if h.held.Load() <= h.lim.budget {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for h.held.Load() > h.lim.budget {
		var worst *wsSock
		var oldest uint64
		for s := range h.socks {
			s.mu.Lock()
			if s.shed == "" && !s.closed && len(s.queue)-s.head >= 2 {
				if seq := s.queue[s.head].seq; worst == nil || seq < oldest {
					worst, oldest = s, seq
				}
			}
			s.mu.Unlock()
		}
		if worst == nil {
			return
		}
		worst.shedFor(shedBudget)
	}
}

// wsGroup is the sockets with one subscription, sharing its recorder
// subscription and one batch encoding every flushEvery at most.
type wsGroup struct {
	hub  *wsHub
	key  string
	f    wsFilter
	sub  *recorder.Subscription
	stop chan struct{}

	mu        sync.Mutex // serialises flushes, joins and leaves
	members   []*wsSock
	batch     wsBatch
	last      time.Time // last flush
	dropsSeen uint64    // the subscription's drops already reported
}

// key names a subscription: sockets with the same key share a group.
func (f wsFilter) key() string {
	k := fmt.Sprint(f.tasks, f.events, f.state)
	if f.events && f.types != nil {
		k += ":" + strings.Join(slices.Sorted(maps.Keys(f.types)), "\x00")
	}
	return k
}

// setFilter makes f the subscription of s: what its old group had queued
// goes first, then the acknowledgement, then what is recorded for f. One
// past lim.maxGroups distinct subscriptions is refused; s keeps its old.
func (h *wsHub) setFilter(s *wsSock, f wsFilter, req *wsSubscribe) {
	h.mu.Lock()
	defer h.mu.Unlock()
	key := f.key()
	old := s.group
	if old != nil && old.key == key && f.any() {
		s.push(h.personal(wsFrame{Stream: "subscribed", Data: req}))
		return
	}
	g := h.groups[key]
	if f.any() && g == nil && len(h.groups) >= h.lim.maxGroups && (old == nil || len(old.members) > 1) {
		s.push(h.personal(*wsError("too_many_subscriptions", "at most "+strconv.Itoa(h.lim.maxGroups)+
			" distinct subscriptions at once across all /ws sockets; the previous subscription stays")))
		return
	}
	if old != nil {
		h.leave(s, old, true)
	}
	ack := h.personal(wsFrame{Stream: "subscribed", Data: req})
	if !f.any() {
		s.push(ack)
		return
	}
	if g == nil {
		g = h.newGroup(key, f)
	}
	g.join(s, ack)
	s.group = g
}

// newGroup starts a group (h.mu held).
func (h *wsHub) newGroup(key string, f wsFilter) *wsGroup {
	g := &wsGroup{hub: h, key: key, f: f, sub: h.rec.Subscribe(h.lim.subBuffer), stop: make(chan struct{})}
	g.sub.Filter(recorder.LiveFilter{Events: f.events, EventTypes: f.types, State: f.state, Tasks: f.tasks})
	h.groups[key] = g
	go g.run()
	return g
}

// leave takes s out of g, first sending g's queued items when flush (a
// resubscribe); the group ends with its last member (h.mu held).
func (h *wsHub) leave(s *wsSock, g *wsGroup, flush bool) {
	g.mu.Lock()
	if flush {
		g.flushLocked()
	}
	g.reportSampled([]*wsSock{s}) // what it was not sent up to now
	g.members = slices.DeleteFunc(g.members, func(m *wsSock) bool { return m == s })
	empty := len(g.members) == 0
	g.mu.Unlock()
	s.group = nil
	if empty {
		delete(h.groups, g.key)
		g.sub.Close()
		close(g.stop)
	}
}

// join adds s to g after sending the members what g had queued, and
// queues ack for s first.
func (g *wsGroup) join(s *wsSock, ack *wsOut) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.flushLocked()
	s.base = g.counts()
	g.members = append(g.members, s)
	s.push(ack)
}

// run flushes the group's subscription at most every flushEvery (at once
// after a quiet spell) and reports sampled counts once a second.
func (g *wsGroup) run() {
	lim := g.hub.lim
	flushAt := time.NewTimer(time.Hour)
	flushAt.Stop()
	defer flushAt.Stop()
	sampleTick := time.NewTicker(time.Second)
	defer sampleTick.Stop()
	armed := false
	for {
		select {
		case <-g.stop:
			return
		case _, ok := <-g.sub.Ready():
			if !ok {
				return
			}
			g.mu.Lock()
			wait := lim.flushEvery - time.Since(g.last)
			if wait <= 0 {
				g.flushLocked()
			}
			g.mu.Unlock()
			if wait > 0 && !armed {
				flushAt.Reset(wait)
				armed = true
			}
		case <-flushAt.C:
			armed = false
			g.mu.Lock()
			g.flushLocked()
			g.mu.Unlock()
		case <-sampleTick.C:
			g.mu.Lock()
			g.reportSampled(g.members)
			g.mu.Unlock()
		}
		g.hub.enforceBudget()
	}
}

// flushLocked hands every member one batch frame of what the subscription
// queued, and tells them of items it dropped (g.mu held).
func (g *wsGroup) flushLocked() {
	g.last = time.Now()
	if err := g.batch.take(g.sub, g.f); err != nil {
		g.batch.reset()
		g.hub.log.Warn("ws_batch_not_encoded", "err", err.Error())
	}
	if g.batch.n > 0 {
		b := g.batch.frame()
		g.deliver(append(make([]byte, 0, len(b)), b...))
	}
	if d := g.sub.Dropped(); d > g.dropsSeen {
		n := d - g.dropsSeen
		g.dropsSeen = d
		for _, m := range g.members {
			total := m.dropped.Add(n)
			m.push(g.hub.personal(wsFrame{Stream: "dropped", Data: map[string]uint64{"count": n, "total": total}}))
		}
	}
}

func (g *wsGroup) deliver(b []byte) {
	if len(g.members) == 0 {
		return
	}
	o := g.hub.newOut(b, len(g.members))
	for _, m := range g.members {
		m.push(o)
	}
}

// counts are the subscription's sampled and sent routine items so far.
func (g *wsGroup) counts() [4]uint64 {
	t, ev := g.sub.Sampled()
	st, sev := g.sub.SentRoutine()
	return [4]uint64{t, ev, st, sev}
}

// reportSampled sends members socks a "sampled" frame of the routine items
// not sent since their last one, if any; sockets with the same counts
// share one frame (g.mu held).
func (g *wsGroup) reportSampled(socks []*wsSock) {
	now := g.counts()
	var byBase map[[4]uint64][]*wsSock
	for _, m := range socks {
		if now[0] > m.base[0] || now[1] > m.base[1] {
			if byBase == nil {
				byBase = map[[4]uint64][]*wsSock{}
			}
			byBase[m.base] = append(byBase[m.base], m)
		}
		m.base = now
	}
	for base, ms := range byBase {
		b, _ := json.Marshal(wsFrame{Stream: "sampled", Data: wsSampled{
			Tasks: now[0] - base[0], Events: now[1] - base[1], PerSecond: recorder.LiveRoutinePerSecond,
			Sent: wsRoutineSent{Tasks: now[2] - base[2], Events: now[3] - base[3]}}})
		o := g.hub.newOut(b, len(ms))
		for _, m := range ms {
			m.push(o)
		}
	}
}
