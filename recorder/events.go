package recorder

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"

	"zombiezen.com/go/sqlite"
)

// Event types the worker emits; they are the recorder's vocabulary.
//
//   - task_received: a message entered the pipeline (Kafka record or HTTP
//     request); TaskID set, payload {source, alias, partition, offset, key}.
//   - task_arranged: arrange() turned a message into tasks; payload lists them.
//   - executor_started / executor_finished: one executor run of a task;
//     finished carries {status, exit_code, duration_ms, output_size_bytes}.
//   - sink_delivered: a result reached a sink; payload {sink, topic, partition, offset}.
//   - dlq_sent: a failed task reached the dead-letter queue (or was
//     dropped); payload {outcome, reason, attempts}, plus {dlq_partition,
//     dlq_offset} where the DLQ record landed when outcome is sent.
//   - offset_committed: Kafka offsets committed; payload {partitions}.
//   - annotation: emitted by handler code; Kind is the annotation kind and
//     Payload its JSON body (read by AnnotationsSource).
//   - runtime_health: a runtime health heartbeat or stall report.
//   - crash_detected: written by Open when the previous run left its
//     watchdog file; Payload is that file's JSON {pid, rss_bytes, ts_ms}.
//   - state: a worker state change (starting, running, draining, stopped);
//     Kind is the state, Payload {state, detail}. Also kept in state_timeline.
//   - config_snapshot: the effective config, secrets masked by the caller;
//     Payload is the config. Also kept in config_snapshots.
//
// Payloads are free JSON chosen by the emitter; the recorder only stores
// them. A payload that is not valid JSON is stored as a JSON string.
const (
	TypeTaskReceived     = "task_received"
	TypeTaskArranged     = "task_arranged"
	TypeExecutorStarted  = "executor_started"
	TypeExecutorFinished = "executor_finished"
	TypeSinkDelivered    = "sink_delivered"
	TypeDLQSent          = "dlq_sent"
	TypeOffsetCommitted  = "offset_committed"
	TypeAnnotation       = "annotation"
	TypeRuntimeHealth    = "runtime_health"
	TypeCrashDetected    = "crash_detected"
	TypeState            = "state"
	TypeConfigSnapshot   = "config_snapshot"
)

// EventTypes lists every event type, the accepted values of an events
// query's type filter.
func EventTypes() []string {
	return []string{
		TypeTaskReceived, TypeTaskArranged, TypeExecutorStarted, TypeExecutorFinished, TypeSinkDelivered,
		TypeDLQSent, TypeOffsetCommitted, TypeAnnotation, TypeRuntimeHealth, TypeCrashDetected, TypeState,
		TypeConfigSnapshot,
	}
}

// Event is one recorded pipeline event. ID is assigned by the recorder: it
// increases with every event of this process (and across restarts of the
// same worker, being seeded from the start time), so it orders and pages
// the events of one worker. Events read from archives and merged files carry
// that file's own row id instead.
type Event struct {
	ID      int64             `json:"id"`
	TSms    int64             `json:"ts_ms"`
	Type    string            `json:"type"`
	Kind    string            `json:"kind"`
	TaskID  string            `json:"task_id"`
	Worker  string            `json:"worker"`
	Labels  map[string]string `json:"labels"`
	Payload json.RawMessage   `json:"payload"`
	// PayloadValid, set by an emitter, says Payload is valid JSON that the
	// emitter hands over and never changes (json.Marshal output): the
	// recorder then neither checks nor copies it. The recorder clears it.
	PayloadValid bool `json:"-"`
}

// Event records e without blocking: TSms defaults to now, Worker to this
// worker. When the write queue is full the event is dropped from storage
// and counted; live subscribers still receive it.
func (r *Recorder) Event(e Event) {
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
	r.Event(Event{Type: TypeConfigSnapshot, Payload: masked})
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
	r.Event(Event{Type: TypeState, Kind: state, Payload: payload})
}

// fillEvent fills defaults and copies the labels (the caller may reuse its
// map) and the payload.
func (r *Recorder) fillEvent(e Event) Event {
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
func (r *Recorder) queueEvent(e *Event) bool {
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
func (r *Recorder) Events(ctx context.Context, q EventQuery) ([]Event, error) {
	q.Limit = clampLimit(q.Limit, 200, 1000)
	if r.memory {
		return r.ring.events(q), nil
	}
	var out []Event
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
		more, err := queryShared(ctx, r, segs, func(db *sqlite.Conn) ([]Event, error) {
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
func (r *Recorder) listEvents(db *sqlite.Conn, q EventQuery) ([]Event, error) {
	query, args := eventsSQL(q)
	out, err := queryEvents(db, query, args...)
	if err != nil {
		return nil, err
	}
	var types []string
	for _, typ := range []string{TypeAnnotation, TypeSinkDelivered} {
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
	slices.SortFunc(out, func(a, b Event) int { return cmp.Compare(b.ID, a.ID) })
	return out[:min(len(out), q.Limit)], nil
}

// foldedEvents returns the events of type typ folded into db's task rows
// that may be among q's answer: rows are read by their highest folded ID
// of typ, newest first, until no further row can beat the q.Limit best IDs
// found so far (best, which it updates). A folded event lies at most
// foldSpan above its row's task_received, so paging below q.BeforeID only
// reads rows whose highest ID is below q.BeforeID + foldSpan and whose
// task_received is below q.BeforeID.
func (r *Recorder) foldedEvents(db *sqlite.Conn, typ string, q EventQuery, best *idFloor) ([]Event, error) {
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
	var out []Event
	err := query(db, sqlq+` ORDER BY `+col+` DESC`, func(st *sqlite.Stmt) error {
		t := r.scanTaskRow(st, true)
		if top := t.summary.topID(typ); !best.beats(top) {
			return errStop
		}
		for _, e := range t.summary.expandExtras(&t) {
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
	ids []int64
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
		f.down(0)
		return true
	}
	f.ids = append(f.ids, id)
	for i := len(f.ids) - 1; i > 0; {
		p := (i - 1) / 2
		if f.ids[p] <= f.ids[i] {
			break
		}
		f.ids[p], f.ids[i] = f.ids[i], f.ids[p]
		i = p
	}
	return true
}

func (f *idFloor) down(i int) {
	for {
		l, m := 2*i+1, i
		if l < len(f.ids) && f.ids[l] < f.ids[m] {
			m = l
		}
		if r := l + 1; r < len(f.ids) && f.ids[r] < f.ids[m] {
			m = r
		}
		if m == i {
			return
		}
		f.ids[i], f.ids[m] = f.ids[m], f.ids[i]
		i = m
	}
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
func queryEvents(db *sqlite.Conn, q string, args ...any) ([]Event, error) {
	var out []Event
	err := query(db, q, func(st *sqlite.Stmt) error {
		out = append(out, Event{ID: st.ColumnInt64(0), TSms: st.ColumnInt64(1), Type: st.ColumnText(2), Kind: st.ColumnText(3),
			TaskID: st.ColumnText(4), Worker: st.ColumnText(5), Labels: decodeLabels(st.ColumnText(6)),
			Payload: normalizeJSON(json.RawMessage(st.ColumnText(7)))})
		return nil
	}, args...)
	return out, err
}

// insertEvent writes e, plus its config_snapshots or state_timeline row.
func insertEvent(w *batchWriter, e *Event) error {
	if err := w.events.add(num(e.ID), num(e.TSms), str(e.Type), str(e.Kind), str(e.TaskID), str(e.Worker), str(encodeLabels(e.Labels)), str(string(e.Payload))); err != nil {
		return err
	}
	var err error
	switch e.Type {
	case TypeConfigSnapshot:
		err = w.exec(`INSERT INTO config_snapshots(ts_ms, config) VALUES(?, ?)`, num(e.TSms), str(string(e.Payload)))
	case TypeState:
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
	return string(appendStringMap(make([]byte, 0, 64), m))
}

// appendStringMap appends encodeStringMap(m).
func appendStringMap(b []byte, m map[string]string) []byte {
	b = append(b, '{')
	for i, k := range slices.Sorted(maps.Keys(m)) {
		if i > 0 {
			b = append(b, ',')
		}
		b = AppendJSONString(append(AppendJSONString(b, k), ':'), m[k])
	}
	return append(b, '}')
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

// clampLimit applies a default and an upper bound.
func clampLimit(n, def, max int) int {
	if n <= 0 {
		return def
	}
	return min(n, max)
}

// AppendJSON appends json.Marshal(e), byte for byte, without reflection:
// the Live stream encodes every event it sends with it (annotations are
// never sampled, one or more a task). A payload that json.Marshal would
// change (whitespace to compact, HTML characters or U+2028/U+2029 to
// escape) or that is not plainly valid goes through json.Marshal.
func (e *Event) AppendJSON(b []byte) ([]byte, error) {
	b = strconv.AppendInt(append(b, `{"id":`...), e.ID, 10)
	b = strconv.AppendInt(append(b, `,"ts_ms":`...), e.TSms, 10)
	b = AppendJSONString(append(b, `,"type":`...), e.Type)
	b = AppendJSONString(append(b, `,"kind":`...), e.Kind)
	b = AppendJSONString(append(b, `,"task_id":`...), e.TaskID)
	b = AppendJSONString(append(b, `,"worker":`...), e.Worker)
	b = append(b, `,"labels":`...)
	if e.Labels == nil {
		b = append(b, "null"...)
	} else {
		b = appendStringMap(b, e.Labels)
	}
	b = append(b, `,"payload":`...)
	switch {
	case e.Payload == nil:
		b = append(b, "null"...)
	case payloadAsIs(e.Payload):
		b = append(b, e.Payload...)
	default:
		q, err := json.Marshal(e.Payload)
		if err != nil {
			return b, err
		}
		b = append(b, q...)
	}
	return append(b, '}'), nil
}

// payloadAsIs reports whether json.Marshal of the raw JSON p gives p
// itself: p is one object or array with no whitespace outside its
// strings, no '<', '>' or '&', no U+2028 or U+2029 and no control byte
// anywhere, and its strings end where they should. It does not check the
// grammar: the recorder only stores payloads that are valid JSON.
func payloadAsIs(p []byte) bool {
	if len(p) < 2 || (p[0] != '{' && p[0] != '[') {
		return false
	}
	in := false
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case c < 0x20 || c == '<' || c == '>' || c == '&':
			return false
		case c == 0xe2 && i+2 < len(p) && p[i+1] == 0x80 && (p[i+2] == 0xa8 || p[i+2] == 0xa9):
			return false
		case in && c == '\\':
			i++ // the escaped byte
		case c == '"':
			in = !in
		case !in && c == ' ':
			return false
		}
	}
	return !in
}
