package recorder

import (
	"cmp"
	"container/heap"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

	"zombiezen.com/go/sqlite"

	"svc/worker/event"
)

// Event records e without blocking: TSms defaults to now, Worker to this
// worker. When the write queue is full the event is dropped from storage
// and counted; live subscribers still receive it.
func (r *Recorder) Event(e event.Event) {
	e = r.fillEvent(e)
	if !r.queueEvent(&e) {
		r.stats.eventsDropped.Add(1)
	} else if r.memory {
		r.ring.addEvent(e)
		r.stats.eventsWritten.Add(1)
	}
	r.subs.publishEvent(e)
}

// ConfigSnapshot records the effective configuration, already masked by the
// caller, as a config_snapshot event.
func (r *Recorder) ConfigSnapshot(masked json.RawMessage) {
	r.Event(event.Event{Type: event.TypeConfigSnapshot, Payload: masked})
}

// State records a worker state change as a state event.
func (r *Recorder) State(state string, detail map[string]any) {
	if detail == nil {
		detail = map[string]any{}
	}
	payload, err := json.Marshal(map[string]any{"state": state, "detail": detail})
	if err != nil {
		payload, _ = json.Marshal(map[string]any{"state": state, "detail_error": err.Error()})
	}
	r.Event(event.Event{Type: event.TypeState, Kind: state, Payload: payload})
}

// fillEvent fills defaults and copies the labels (the caller may reuse its
// map) and the payload.
func (r *Recorder) fillEvent(e event.Event) event.Event {
	if e.TSms == 0 {
		e.TSms = r.cfg.Now().UnixMilli()
	}
	if e.Worker == "" {
		e.Worker = r.cfg.Worker
	}
	e.Labels = cloneLabels(e.Labels)
	if !e.PayloadValid || len(e.Payload) == 0 {
		e.Payload = normalizeJSON(e.Payload)
	}
	e.PayloadValid = false
	return e
}

// queueEvent assigns the next ID and, with a live file, queues e for the
// writer; false means it was dropped. One lock covers both so the queue is
// in ID order. The writer only reads *e.
func (r *Recorder) queueEvent(e *event.Event) bool {
	r.inMu.Lock()
	defer r.inMu.Unlock()
	e.ID = r.nextID
	r.nextID++
	if r.memory {
		return true
	}
	return r.enqueueLocked(item{ev: e})
}

// enqueue offers it to the writer; false means it was dropped.
func (r *Recorder) enqueue(it item) bool {
	r.inMu.Lock()
	defer r.inMu.Unlock()
	return r.enqueueLocked(it)
}

// normalizeJSON copies raw and turns an empty or invalid value into valid JSON.
func normalizeJSON(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage("null")
	}
	if !json.Valid(raw) {
		b, _ := json.Marshal(string(raw))
		return b
	}
	return append(json.RawMessage(nil), raw...)
}

// EventQuery filters Events. Limit is clamped to 1-1000 (default 200).
type EventQuery struct {
	Types    []string
	Limit    int
	TaskID   string
	BeforeID int64 // only events with a smaller ID; 0 = newest
}

// Events returns this worker's recent events, newest first: the live file,
// continued into the files this process sealed most recently when the live
// file alone cannot fill the limit; the ring in memory-only mode.
func (r *Recorder) Events(ctx context.Context, q EventQuery) ([]event.Event, error) {
	q.Limit = clampLimit(q.Limit, 200, 1000)
	if r.memory {
		return r.ring.events(q), nil
	}
	var out []event.Event
	err := r.withLive(ctx, func(db *sqlite.Conn) error {
		var err error
		out, err = r.listEvents(db, q)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("query events: %w", err)
	}
	for _, segs := range r.recentSealed() {
		if len(out) >= q.Limit {
			break
		}
		if len(out) > 0 {
			q.BeforeID = out[len(out)-1].ID
		}
		sub := q
		sub.Limit -= len(out)
		more, err := queryShared(ctx, r, segs, func(db *sqlite.Conn) ([]event.Event, error) {
			return r.listEvents(db, sub)
		})
		if err != nil {
			if !errors.Is(err, os.ErrNotExist) { // archived meanwhile: expected
				r.log.Warn("recorder_query_sealed_failed", "file", strings.Join(segs, "/"), "error", err)
			}
			continue
		}
		out = append(out, more...)
	}
	return out, nil
}

// listEvents is Events over one file: its event rows and the annotations and deliveries folded into its task rows, newest first,
// at most q.Limit.
func (r *Recorder) listEvents(db *sqlite.Conn, q EventQuery) ([]event.Event, error) {
	query, args := eventsSQL(q)
	out, err := queryEvents(db, query, args...)
	if err != nil {
		return nil, err
	}
	var types []string
	for _, typ := range []string{event.TypeAnnotation, event.TypeSinkDelivered} {
		if len(q.Types) == 0 || slices.Contains(q.Types, typ) {
			types = append(types, typ)
		}
	}
	if len(types) == 0 {
		return out, nil
	}
	best := newIDFloor(q.Limit)
	for _, e := range out {
		best.offer(e.ID)
	}
	n := len(out)
	for _, typ := range types {
		more, err := r.foldedEvents(db, typ, q, best)
		if err != nil {
			return nil, fmt.Errorf("folded %s events: %w", typ, err)
		}
		out = append(out, more...)
	}
	if len(out) == n {
		return out, nil
	}
	slices.SortFunc(out, func(a, b event.Event) int { return cmp.Compare(b.ID, a.ID) })
	return out[:min(len(out), q.Limit)], nil
}

// foldedEvents returns the events of type typ folded into db's task rows
// that may be among q's answer: rows are read by their highest folded ID
// of typ, newest first, until no further row can beat the q.Limit best IDs
// found so far (best, which it updates).
func (r *Recorder) foldedEvents(db *sqlite.Conn, typ string, q EventQuery, best *idFloor) ([]event.Event, error) {
	col := extraTopColumns[typ]
	sqlq := `SELECT ` + rowColumns + ` FROM tasks WHERE ` + col + ` != 0`
	var args []any
	if q.BeforeID > 0 {
		// A folded event lies above its row's task_received and at most
		// foldSpan above it: rows received at or after BeforeID hold none
		// below it, and SQLite skips them without handing them over.
		sqlq += ` AND ` + col + ` < ? AND sum_received_id < ?`
		args = append(args, q.BeforeID+foldSpan, q.BeforeID)
	}
	if q.TaskID != "" {
		sqlq += ` AND task_id = ?`
		args = append(args, q.TaskID)
	}
	var out []event.Event
	err := query(db, sqlq+` ORDER BY `+col+` DESC`, func(st *sqlite.Stmt) error {
		t, sum := r.scanTaskRow(st), scanSummary(st)
		if top := sum.topID(typ); !best.beats(top) {
			return errStop
		}
		for _, e := range sum.expandExtras(&t) {
			if e.Type == typ && (q.BeforeID <= 0 || e.ID < q.BeforeID) && best.offer(e.ID) {
				out = append(out, e)
			}
		}
		return nil
	}, args...)
	if errors.Is(err, errStop) {
		err = nil
	}
	return out, err
}

// errStop ends a query's rows early.
var errStop = errors.New("stop")

// idFloor keeps the n highest event IDs offered (a min-heap).
type idFloor struct {
	n   int
	ids int64Heap
}

func newIDFloor(n int) *idFloor { return &idFloor{n: n} }

// beats reports whether id would be among the n highest.
func (f *idFloor) beats(id int64) bool { return len(f.ids) < f.n || id > f.ids[0] }

// offer adds id when it beats the lowest kept; it reports whether it did.
func (f *idFloor) offer(id int64) bool {
	if !f.beats(id) {
		return false
	}
	if len(f.ids) == f.n {
		f.ids[0] = id
		heap.Fix(&f.ids, 0)
	} else {
		heap.Push(&f.ids, id)
	}
	return true
}

// int64Heap is a min-heap of IDs for container/heap.
type int64Heap []int64

func (h int64Heap) Len() int           { return len(h) }
func (h int64Heap) Less(i, j int) bool { return h[i] < h[j] }
func (h int64Heap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *int64Heap) Push(x any)        { *h = append(*h, x.(int64)) }

func (h *int64Heap) Pop() any {
	x := (*h)[len(*h)-1]
	*h = (*h)[:len(*h)-1]
	return x
}

// eventsSQL builds the Events query for one file.
func eventsSQL(q EventQuery) (string, []any) {
	var where []string
	var args []any
	if q.BeforeID > 0 {
		where = append(where, `id < ?`)
		args = append(args, q.BeforeID)
	}
	if q.TaskID != "" {
		where = append(where, `task_id = ?`)
		args = append(args, q.TaskID)
	}
	if len(q.Types) > 0 {
		where = append(where, `type IN (?`+strings.Repeat(`, ?`, len(q.Types)-1)+`)`)
		for _, t := range q.Types {
			args = append(args, t)
		}
	}
	query := `SELECT id, ts_ms, type, kind, task_id, worker, labels, payload FROM events`
	if len(where) > 0 {
		query += ` WHERE ` + strings.Join(where, ` AND `)
	}
	args = append(args, q.Limit)
	return query + ` ORDER BY id DESC LIMIT ?`, args
}

// queryEvents runs a query selecting the eight event columns in order.
func queryEvents(db *sqlite.Conn, q string, args ...any) ([]event.Event, error) {
	var out []event.Event
	err := query(db, q, func(st *sqlite.Stmt) error {
		out = append(out, event.Event{ID: st.ColumnInt64(0), TSms: st.ColumnInt64(1), Type: st.ColumnText(2), Kind: st.ColumnText(3),
			TaskID: st.ColumnText(4), Worker: st.ColumnText(5), Labels: decodeLabels(st.ColumnText(6)),
			Payload: normalizeJSON(json.RawMessage(st.ColumnText(7)))})
		return nil
	}, args...)
	return out, err
}

// insertEvent writes e, plus its config_snapshots or state_timeline row.
func insertEvent(w *batchWriter, e *event.Event) error {
	if err := w.events.add(num(e.ID), num(e.TSms), str(e.Type), str(e.Kind), str(e.TaskID), str(e.Worker), str(encodeLabels(e.Labels)), str(string(e.Payload))); err != nil {
		return err
	}
	var err error
	switch e.Type {
	case event.TypeConfigSnapshot:
		err = w.exec(`INSERT INTO config_snapshots(ts_ms, config) VALUES(?, ?)`, num(e.TSms), str(string(e.Payload)))
	case event.TypeState:
		var p struct {
			Detail json.RawMessage `json:"detail"`
		}
		json.Unmarshal(e.Payload, &p)
		err = w.exec(`INSERT INTO state_timeline(ts_ms, state, detail) VALUES(?, ?, ?)`,
			num(e.TSms), str(e.Kind), str(string(normalizeJSON(p.Detail))))
	}
	if err != nil {
		return fmt.Errorf("insert %s: %w", e.Type, err)
	}
	return nil
}

// encodeLabels stores labels as a JSON object ("{}" when empty).
func encodeLabels(m map[string]string) string {
	if len(m) == 0 {
		return "{}"
	}
	return encodeStringMap(m)
}

// encodeStringMap is json.Marshal of m, byte for byte (keys sorted, HTML
// characters escaped), without reflection: it runs for every task row and
// event with labels or env (TestEncodeStringMapMatchesMarshal).
func encodeStringMap(m map[string]string) string {
	return string(event.AppendStringMap(make([]byte, 0, 64), m))
}

// decodeLabels reads a JSON object of strings; anything else gives an empty map.
func decodeLabels(s string) map[string]string {
	m := map[string]string{}
	json.Unmarshal([]byte(s), &m)
	return m
}

// cloneLabels copies m, never returning nil so JSON shows {} rather than null.
func cloneLabels(m map[string]string) map[string]string {
	if len(m) == 0 {
		return noLabels
	}
	return maps.Clone(m)
}

// noLabels is the labels of every event and task row that has none: one
// shared empty map (encoded {}, never written to), not one per item (an
// empty map per item was 2.6 % of the bytes svc allocated under load).
var noLabels = map[string]string{}

func clampLimit(n, def, max int) int {
	if n <= 0 {
		return def
	}
	return min(n, max)
}
