package recorder

import (
	"encoding/json"
	"fmt"
	"maps"
	"strconv"
	"time"

	"zombiezen.com/go/sqlite"

	"svc/worker/event"
)

// Summarized tasks (docs/storage-format.md, 3.1 and 3.2): the writer holds
// a task's lifecycle events until its row arrives or summaryHold passes;
// event.Fold folds them into the row only when the events it would rebuild
// equal the ones held, so a summary never misstates what happened (a
// successful first attempt's stdout_tail is the one thing dropped).

// summaryHold (wall time) is how long the writer keeps a task's lifecycle
// events waiting for its row before writing them as rows.
const summaryHold = time.Second

// maxSummaryPending bounds the tasks whose events wait in the writer;
// past it, events are written as rows at once.
const maxSummaryPending = 16384

// Summary is what a summarized task row stores in its sum_* columns: its
// folded lifecycle events and extras. ReceivedID 0: stored as rows.
type Summary struct {
	event.Lifecycle
	// Extras are the annotations and deliveries folded into the row.
	Extras []Extra
}

// Extra is an annotation or a sink_delivered event folded into a task row;
// it has the row's task_id, worker and labels.
type Extra struct {
	DID     int64  // event ID − ReceivedID (> 0)
	DMs     int64  // ts_ms − ReceivedMs
	Type    string // TypeAnnotation or TypeSinkDelivered
	Kind    string
	Payload json.RawMessage
}

// extraColumns are the tasks columns of a Summary's Extras.
const extraColumns = `sum_events, sum_ann_top, sum_del_top`

// extraTopColumns names the column holding a row's highest folded ID of a type.
var extraTopColumns = map[string]string{event.TypeAnnotation: "sum_ann_top", event.TypeSinkDelivered: "sum_del_top"}

// foldSpan bounds how far past task_received an event may be folded (in
// event IDs), so that Events, paging below an ID, knows which rows can
// hold folded events below it (see foldedEvents).
const foldSpan = 1 << 16

// deliveryHold (wall time) is how long a summarized row waits for the
// sink_delivered events it announces (TaskRow.Deliveries).
const deliveryHold = 500 * time.Millisecond

// extraCodes are the stored type codes of folded events.
var extraCodes = map[string]string{event.TypeAnnotation: "a", event.TypeSinkDelivered: "d"}

// topID is the highest event ID of type typ in s.Extras (0: none).
func (s Summary) topID(typ string) int64 {
	var top int64
	for _, x := range s.Extras {
		if x.Type == typ {
			top = max(top, s.ReceivedID+x.DID)
		}
	}
	return top
}

// encodeExtras encodes extras as sum_events: a JSON array of
// [did, dms, code, kind, payload] arrays ("" when none).
func encodeExtras(extras []Extra) string {
	if len(extras) == 0 {
		return ""
	}
	b := make([]byte, 0, 64*len(extras))
	b = append(b, '[')
	for i, x := range extras {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(append(b, '['), x.DID, 10)
		b = strconv.AppendInt(append(b, ','), x.DMs, 10)
		b = event.AppendJSONString(append(b, ','), extraCodes[x.Type])
		b = event.AppendJSONString(append(b, ','), x.Kind)
		b = append(append(append(b, ','), x.Payload...), ']')
	}
	return string(append(b, ']'))
}

// decodeExtras reads sum_events; what it cannot read is skipped.
func decodeExtras(s string) []Extra {
	if s == "" {
		return nil
	}
	var raw [][]json.RawMessage
	if json.Unmarshal([]byte(s), &raw) != nil {
		return nil
	}
	out := make([]Extra, 0, len(raw))
	for _, r := range raw {
		var x Extra
		var code string
		if len(r) != 5 || json.Unmarshal(r[0], &x.DID) != nil || json.Unmarshal(r[1], &x.DMs) != nil ||
			json.Unmarshal(r[2], &code) != nil || json.Unmarshal(r[3], &x.Kind) != nil {
			continue
		}
		for typ, c := range extraCodes {
			if c == code {
				x.Type = typ
			}
		}
		if x.Type == "" {
			continue
		}
		x.Payload = r[4]
		out = append(out, x)
	}
	return out
}

// foldable reports whether e can be folded into the summarized row t:
// an annotation or sink_delivered event of the same worker and labels,
// after its task_received and within foldSpan of it.
func foldable(t *event.TaskRow, s *Summary, e *event.Event) bool {
	d := e.ID - s.ReceivedID
	return extraCodes[e.Type] != "" && s.ReceivedID > 0 && d > 0 && d <= foldSpan &&
		e.Worker == t.Worker && e.TaskID == t.TaskID && maps.Equal(e.Labels, t.Labels)
}

func addExtra(s *Summary, e *event.Event) {
	s.Extras = append(s.Extras, Extra{DID: e.ID - s.ReceivedID, DMs: e.TSms - s.ReceivedMs, Type: e.Type, Kind: e.Kind, Payload: e.Payload})
}

// summaryColumns are the tasks columns of a Summary, in field order.
const summaryColumns = `sum_received_id, sum_started_did, sum_finished_did, sum_received_ms, sum_started_dms, sum_finished_dms, sum_input_bytes, sum_attempt_ms`

// rowColumns are every column of a task row: taskColumns, summaryColumns,
// extraColumns.
const rowColumns = taskColumns + `, ` + summaryColumns + `, ` + extraColumns

// expand rebuilds the lifecycle events, annotations and deliveries of the
// summarized row t.
func (s Summary) expand(t *event.TaskRow) []event.Event {
	return append(s.Lifecycle.Expand(t), s.expandExtras(t)...)
}

// expandExtras rebuilds the folded annotations and deliveries of row t.
func (s Summary) expandExtras(t *event.TaskRow) []event.Event {
	out := make([]event.Event, 0, len(s.Extras))
	for _, x := range s.Extras {
		out = append(out, event.Event{ID: s.ReceivedID + x.DID, TSms: s.ReceivedMs + x.DMs, Type: x.Type, Kind: x.Kind,
			TaskID: t.TaskID, Worker: t.Worker, Labels: cloneLabels(t.Labels), Payload: x.Payload})
	}
	return out
}

// pendingTask is a task whose lifecycle events wait for its row.
type pendingTask struct {
	events []*event.Event // lifecycle events
	extras []*event.Event // annotations, folded with them when the row folds
	since  time.Time
	first  [3]*event.Event // backs events for the usual three
}

// heldRow is a summarized task row waiting for its deliveries.
type heldRow struct {
	it    item
	want  int // sink_delivered events still expected
	since time.Time
}

// summarizer is the writer's fold of lifecycle events into task rows. Only
// the writer goroutine uses it.
type summarizer struct {
	on bool
	// sampleAbove, second, used: this second's allowance of plain
	// successful task rows (0: all).
	sampleAbove int
	second      int64
	used        int
	pending     map[string]*pendingTask
	order       []string // task IDs in arrival order, for aging; may hold resolved IDs
	held        map[string]*heldRow
	heldOrder   []string // likewise for held
	spare       []item   // the last written batch's slice, for the next filter
}

// filter turns a batch taken off the queue into the items to write now:
// lifecycle events wait for their task row, task rows take the summary of
// their waiting events (or have them written first), and events that
// waited too long are released.
func (s *summarizer) filter(items []item, now time.Time) []item {
	out := s.spare[:0]
	s.spare = nil
	if cap(out) < len(items) {
		out = make([]item, 0, len(items))
	}
	for _, it := range items {
		switch {
		case it.ev != nil && s.on && event.IsLifecycle(it.ev) && len(s.pending) < maxSummaryPending:
			p := s.pending[it.ev.TaskID]
			if p == nil {
				p = &pendingTask{since: now}
				p.events = p.first[:0]
				s.pending[it.ev.TaskID] = p
				s.order = append(s.order, it.ev.TaskID)
			}
			p.events = append(p.events, it.ev)
		case it.ev != nil && it.ev.Type == event.TypeAnnotation && s.pending[it.ev.TaskID] != nil:
			// An annotation just before its task row waits to be folded.
			p := s.pending[it.ev.TaskID]
			p.extras = append(p.extras, it.ev)
		case it.ev != nil && it.ev.Type == event.TypeSinkDelivered && s.held[it.ev.TaskID] != nil:
			h := s.held[it.ev.TaskID]
			if !foldable(h.it.task, h.it.sum, it.ev) {
				out = append(out, it)
				continue
			}
			addExtra(h.it.sum, it.ev)
			h.it.folded++
			if h.want--; h.want <= 0 {
				delete(s.held, it.ev.TaskID)
				out = append(out, h.it)
			}
		case it.ev != nil:
			// Events are ordered by id, so others are written at once.
			out = append(out, item{ev: s.dropOKTail(it.ev)})
		default:
			out = s.row(out, it, now)
		}
	}
	return s.age(out, now, false)
}

// row folds a task row with its waiting events when it can, then holds it
// for its announced deliveries or writes it at once.
func (s *summarizer) row(out []item, it item, now time.Time) []item {
	p := s.pending[it.task.TaskID]
	if p == nil {
		return append(out, it)
	}
	delete(s.pending, it.task.TaskID)
	lc, ok := event.Fold(p.events, it.task)
	if !ok {
		return append(s.release(out, it.task.TaskID, p), it)
	}
	t := it.task
	row := item{task: t, sum: &Summary{Lifecycle: lc}, folded: len(p.events)}
	for _, e := range p.extras {
		if !foldable(t, row.sum, e) {
			out = append(out, item{ev: e})
			continue
		}
		addExtra(row.sum, e)
		row.folded++
	}
	// Only a row that stands for nothing but its lifecycle is sampled.
	row.sampled = len(row.sum.Extras) == 0 && t.Deliveries <= 0 && s.sampleOut(now)
	if row.sampled || t.Deliveries <= 0 || len(s.held) >= maxSummaryPending {
		return append(out, row)
	}
	s.held[t.TaskID] = &heldRow{it: row, want: t.Deliveries, since: now}
	s.heldOrder = append(s.heldOrder, t.TaskID)
	return out
}

// recycle takes back a written batch's slice for the next one (a fresh
// slice per batch was 3 % of svc's allocations).
func (s *summarizer) recycle(items []item) {
	clear(items) // drop the events and rows for the collector
	s.spare = items[:0]
}

// sampleOut spends one unit of this second's allowance of plain successful
// task rows; true when it is spent: the row is counted, not stored.
func (s *summarizer) sampleOut(now time.Time) bool {
	if s.sampleAbove <= 0 {
		return false
	}
	if sec := now.Unix(); sec != s.second {
		s.second, s.used = sec, 0
	}
	s.used++
	return s.used > s.sampleAbove
}

// release writes the waiting events of taskID.
func (s *summarizer) release(out []item, taskID string, p *pendingTask) []item {
	delete(s.pending, taskID)
	for _, e := range p.events {
		out = append(out, item{ev: s.dropOKTail(e)})
	}
	for _, e := range p.extras {
		out = append(out, item{ev: e})
	}
	return out
}

// age releases tasks that waited summaryHold and held rows that waited
// deliveryHold (all of them when flush).
func (s *summarizer) age(out []item, now time.Time, flush bool) []item {
	s.order = ageQueue(s.order, s.pending, func(p *pendingTask) bool { return !flush && now.Sub(p.since) < summaryHold },
		func(id string, p *pendingTask) { out = s.release(out, id, p) })
	s.heldOrder = ageQueue(s.heldOrder, s.held, func(h *heldRow) bool { return !flush && now.Sub(h.since) < deliveryHold },
		func(id string, h *heldRow) { delete(s.held, id); out = append(out, h.it) })
	return out
}

// ageQueue walks order (IDs in arrival order, some already resolved in m)
// from the oldest, releasing entries until young says one must wait; it
// returns what is left of order.
func ageQueue[T any](order []string, m map[string]T, young func(T) bool, release func(string, T)) []string {
	i := 0
	for ; i < len(order); i++ {
		v, ok := m[order[i]]
		if !ok {
			continue
		}
		if young(v) {
			break
		}
		release(order[i], v)
	}
	order = order[i:]
	if len(order) == 0 && cap(order) > 4*maxSummaryPending {
		order = nil
	}
	return order
}

// flush releases every waiting event (seal, shutdown).
func (s *summarizer) flush(now time.Time) []item { return s.age(nil, now, true) }

func (s *summarizer) waiting() int { return len(s.pending) + len(s.held) }

// dropOKTail drops the stdout tail of a successful first attempt's
// executor_finished when summaries are on.
func (s *summarizer) dropOKTail(e *event.Event) *event.Event {
	if !s.on {
		return e
	}
	return event.DropOKTail(e)
}

// summarizedEvents rebuilds the lifecycle events of taskID's summarized
// rows in db.
func summarizedEvents(r *Recorder, db *sqlite.Conn, taskID string) ([]event.Event, error) {
	var out []event.Event
	err := query(db, `SELECT `+rowColumns+` FROM tasks WHERE task_id = ? AND sum_received_id != 0 ORDER BY id LIMIT ?`,
		func(st *sqlite.Stmt) error {
			t := r.scanTaskRow(st)
			out = append(out, scanSummary(st).expand(&t)...)
			return nil
		}, taskID, maxTraceEvents)
	if err != nil {
		return nil, fmt.Errorf("summarized rows: %w", err)
	}
	return out, nil
}
