package recorder

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"maps"
	"time"
)

// Summarized tasks (format 2).
//
// A task that succeeded at its first attempt without stderr is the bulk of
// a busy worker's traffic and the least interesting part of its history.
// Its three lifecycle events (task_received, executor_started,
// executor_finished) are not stored as event rows: the writer folds them
// into eight integer columns of the task's row (schemaStep2), and Trace
// rebuilds them from there, byte for byte the events that were emitted
// (same IDs, times, labels and payloads), except that a successful first
// attempt's stdout_tail is not kept (Live subscribers still receive it).
// Annotations, deliveries, DLQ records and every event of a task that
// failed, retried, timed out, wrote to stderr or ran longer than
// summaryHold stay rows, as before.
//
// The writer holds a task's lifecycle events until its row arrives or
// summaryHold passes, whichever comes first, and folds them only after
// checking that the events it would rebuild equal the ones it holds; when
// they do not, it writes the events it holds. So a summary can only drop
// what the policy drops, never misstate what happened.

// summaryHold (wall time, not Config.Now) is how long the writer keeps a task's lifecycle events
// waiting for its row before writing them as rows.
const summaryHold = time.Second

// maxSummaryPending bounds the tasks whose events wait in the writer;
// past it, events are written as rows at once.
const maxSummaryPending = 16384

// Summary is the part of a task row that stands for its lifecycle events
// (columns sum_* in the tasks table). ReceivedID 0 means the events are
// stored as rows.
type Summary struct {
	ReceivedID      int64 // event ID of task_received
	StartedDID      int64 // executor_started ID − ReceivedID
	FinishedDID     int64 // executor_finished ID − ReceivedID
	ReceivedMs      int64 // ts_ms of task_received
	StartedDMs      int64 // executor_started ts_ms − ReceivedMs
	FinishedDMs     int64 // executor_finished ts_ms − ReceivedMs
	InputSizeBytes  int64 // task_received's input_size_bytes
	AttemptDuration int64 // executor_finished's duration_ms
}

// summaryColumns are the tasks columns of a Summary, in field order.
const summaryColumns = `sum_received_id, sum_started_did, sum_finished_did, sum_received_ms, sum_started_dms, sum_finished_dms, sum_input_bytes, sum_attempt_ms`

// schemaStep2 adds the summary columns (format 2).
const schemaStep2 = `ALTER TABLE tasks ADD COLUMN sum_received_id INTEGER NOT NULL DEFAULT 0;
	ALTER TABLE tasks ADD COLUMN sum_started_did INTEGER NOT NULL DEFAULT 0;
	ALTER TABLE tasks ADD COLUMN sum_finished_did INTEGER NOT NULL DEFAULT 0;
	ALTER TABLE tasks ADD COLUMN sum_received_ms INTEGER NOT NULL DEFAULT 0;
	ALTER TABLE tasks ADD COLUMN sum_started_dms INTEGER NOT NULL DEFAULT 0;
	ALTER TABLE tasks ADD COLUMN sum_finished_dms INTEGER NOT NULL DEFAULT 0;
	ALTER TABLE tasks ADD COLUMN sum_input_bytes INTEGER NOT NULL DEFAULT 0;
	ALTER TABLE tasks ADD COLUMN sum_attempt_ms INTEGER NOT NULL DEFAULT 0;`

// receivedPayload and attemptPayload are the payloads the worker emits
// (worker/events.go), in the same field order, so that rebuilt events
// encode to the same bytes. The writer checks that they do before it
// folds anything.
type receivedPayload struct {
	Source         string `json:"source,omitempty"`
	Alias          string `json:"alias,omitempty"`
	Partition      *int32 `json:"partition,omitempty"`
	Offset         *int64 `json:"offset,omitempty"`
	Key            string `json:"key,omitempty"`
	KeyEncoding    string `json:"key_encoding,omitempty"`
	InputSizeBytes int64  `json:"input_size_bytes"`
}

type startedPayload struct {
	Attempt int `json:"attempt"`
}

type finishedPayload struct {
	Attempt         int    `json:"attempt"`
	Status          string `json:"status,omitempty"`
	ExitCode        *int   `json:"exit_code,omitempty"`
	DurationMS      int64  `json:"duration_ms,omitempty"`
	OutputSizeBytes int64  `json:"output_size_bytes,omitempty"`
	StdoutTail      string `json:"stdout_tail,omitempty"`
	// Error and StderrTail are never set on a summarized attempt; they are
	// here so that an attempt carrying them does not decode as foldable.
	Error      string `json:"error,omitempty"`
	StderrTail string `json:"stderr_tail,omitempty"`
}

// expand rebuilds the three lifecycle events of a summarized task row.
func (s Summary) expand(t *TaskRow) []Event {
	rp := receivedPayload{Source: t.Source, Alias: t.Alias, InputSizeBytes: s.InputSizeBytes}
	if t.Source == "kafka" {
		rp.Partition, rp.Offset = &t.Partition, &t.Offset
	}
	if enc := t.KeyEncoding(); enc != "" {
		rp.Key, rp.KeyEncoding = t.Key, enc
	}
	zero := 0
	fp := finishedPayload{Attempt: 1, Status: t.Status, ExitCode: &zero, DurationMS: s.AttemptDuration, OutputSizeBytes: t.OutputSizeBytes}
	raw := func(v any) json.RawMessage { b, _ := json.Marshal(v); return b }
	ev := func(id, ts int64, typ string, p any) Event {
		return Event{ID: id, TSms: ts, Type: typ, TaskID: t.TaskID, Worker: t.Worker, Labels: cloneLabels(t.Labels), Payload: raw(p)}
	}
	return []Event{
		ev(s.ReceivedID, s.ReceivedMs, TypeTaskReceived, rp),
		ev(s.ReceivedID+s.StartedDID, s.ReceivedMs+s.StartedDMs, TypeExecutorStarted, startedPayload{Attempt: 1}),
		ev(s.ReceivedID+s.FinishedDID, s.ReceivedMs+s.FinishedDMs, TypeExecutorFinished, fp),
	}
}

// pendingTask is a task whose lifecycle events wait for its row.
type pendingTask struct {
	events []*Event
	since  time.Time
}

// summarizer is the writer's fold of lifecycle events into task rows. Only
// the writer goroutine uses it.
type summarizer struct {
	on      bool
	pending map[string]*pendingTask
	order   []string // task IDs in arrival order, for aging; may hold resolved IDs
}

func newSummarizer(on bool) *summarizer {
	return &summarizer{on: on, pending: map[string]*pendingTask{}}
}

// lifecycle reports whether e is one of the events a summary stands for.
func lifecycle(e *Event) bool {
	if e.TaskID == "" || e.Kind != "" {
		return false
	}
	switch e.Type {
	case TypeTaskReceived, TypeExecutorStarted, TypeExecutorFinished:
		return true
	}
	return false
}

// filter turns a batch taken off the queue into the items to write now:
// lifecycle events wait for their task row, task rows take the summary of
// their waiting events (or have them written first), and events that
// waited longer than summaryHold are released. Stdout tails of successful
// first attempts are dropped from every executor_finished written.
func (s *summarizer) filter(items []item, now time.Time) []item {
	out := make([]item, 0, len(items))
	for _, it := range items {
		switch {
		case it.ev != nil && s.on && lifecycle(it.ev) && len(s.pending) < maxSummaryPending:
			p := s.pending[it.ev.TaskID]
			if p == nil {
				p = &pendingTask{since: now}
				s.pending[it.ev.TaskID] = p
				s.order = append(s.order, it.ev.TaskID)
			}
			p.events = append(p.events, it.ev)
		case it.ev != nil:
			// Annotations, deliveries and the like are written at once, also
			// for a waiting task: events are ordered by id, not by insertion.
			out = append(out, item{ev: s.dropOKTail(it.ev)})
		default:
			if p := s.pending[it.task.TaskID]; p != nil {
				delete(s.pending, it.task.TaskID)
				if sum, ok := fold(p.events, it.task); ok {
					t := *it.task
					t.summary = sum
					out = append(out, item{task: &t, folded: len(p.events)})
					continue
				}
				for _, e := range p.events {
					out = append(out, item{ev: s.dropOKTail(e)})
				}
			}
			out = append(out, it)
		}
	}
	return s.age(out, now, false)
}

// release writes the waiting events of taskID.
func (s *summarizer) release(out []item, taskID string, p *pendingTask) []item {
	delete(s.pending, taskID)
	for _, e := range p.events {
		out = append(out, item{ev: s.dropOKTail(e)})
	}
	return out
}

// age releases tasks that waited summaryHold (all of them when flush).
func (s *summarizer) age(out []item, now time.Time, flush bool) []item {
	i := 0
	for ; i < len(s.order); i++ {
		id := s.order[i]
		p := s.pending[id]
		if p == nil {
			continue
		}
		if !flush && now.Sub(p.since) < summaryHold {
			break
		}
		out = s.release(out, id, p)
	}
	s.order = s.order[i:]
	if len(s.order) == 0 && cap(s.order) > 4*maxSummaryPending {
		s.order = nil
	}
	return out
}

// flush releases every waiting event (seal, shutdown).
func (s *summarizer) flush(now time.Time) []item { return s.age(nil, now, true) }

// waiting is the number of tasks whose events wait.
func (s *summarizer) waiting() int { return len(s.pending) }

// dropOKTail returns e without the stdout tail when summaries are on and it
// is the executor_finished of a successful first attempt without stderr;
// other events are returned as they are.
func (s *summarizer) dropOKTail(e *Event) *Event {
	if !s.on {
		return e
	}
	return dropOKTail(e)
}

func dropOKTail(e *Event) *Event {
	if e.Type != TypeExecutorFinished || !bytes.Contains(e.Payload, []byte(`"stdout_tail"`)) {
		return e
	}
	var fp finishedPayload
	if json.Unmarshal(e.Payload, &fp) != nil || fp.Attempt != 1 || fp.Status != "ok" || fp.StderrTail != "" || fp.Error != "" {
		return e
	}
	fp.StdoutTail = ""
	b, err := json.Marshal(fp)
	if err != nil {
		return e
	}
	// Keep fields this build does not know: only drop the tail when the
	// payload is exactly what finishedPayload re-encodes.
	var check map[string]json.RawMessage
	if json.Unmarshal(e.Payload, &check) != nil {
		return e
	}
	delete(check, "stdout_tail")
	var mine map[string]json.RawMessage
	json.Unmarshal(b, &mine)
	if !maps.EqualFunc(check, mine, func(a, b json.RawMessage) bool { return bytes.Equal(a, b) }) {
		return e
	}
	c := *e
	c.Payload = b
	return &c
}

// fold returns the summary of events for row t when the events are exactly
// one received, one started and one finished (first attempt, ok, exit 0,
// no error, no stderr) and rebuilding them from the summary gives the same
// events (stdout tail aside).
func fold(events []*Event, t *TaskRow) (Summary, bool) {
	if len(events) != 3 || t.Status != "ok" || t.Attempts != 1 || t.Error != "" {
		return Summary{}, false
	}
	rcv, st, fin := events[0], events[1], events[2]
	if rcv.Type != TypeTaskReceived || st.Type != TypeExecutorStarted || fin.Type != TypeExecutorFinished {
		return Summary{}, false
	}
	var rp receivedPayload
	var fp finishedPayload
	if json.Unmarshal(rcv.Payload, &rp) != nil || json.Unmarshal(fin.Payload, &fp) != nil {
		return Summary{}, false
	}
	s := Summary{
		ReceivedID: rcv.ID, StartedDID: st.ID - rcv.ID, FinishedDID: fin.ID - rcv.ID,
		ReceivedMs: rcv.TSms, StartedDMs: st.TSms - rcv.TSms, FinishedDMs: fin.TSms - rcv.TSms,
		InputSizeBytes: rp.InputSizeBytes, AttemptDuration: fp.DurationMS,
	}
	if s.ReceivedID <= 0 {
		return Summary{}, false
	}
	fin = dropOKTail(fin)
	for i, e := range s.expand(t) {
		want := events[i]
		if i == 2 {
			want = fin
		}
		if e.ID != want.ID || e.TSms != want.TSms || e.Worker != want.Worker || e.Kind != want.Kind ||
			!maps.Equal(e.Labels, cloneLabels(want.Labels)) || !bytes.Equal(e.Payload, want.Payload) {
			return Summary{}, false
		}
	}
	return s, true
}

// fileVersion is a database's schema version (PRAGMA user_version).
func fileVersion(ctx context.Context, db *sql.DB) (int, error) {
	var v int
	err := db.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&v)
	return v, err
}

// summarizedEvents rebuilds the lifecycle events of taskID's summarized
// rows in db; a format-1 file has none.
func summarizedEvents(ctx context.Context, r *Recorder, db *sql.DB, taskID string) ([]Event, error) {
	v, err := fileVersion(ctx, db)
	if err != nil || v < 2 {
		return nil, err
	}
	rows, err := r.queryTasksWith(ctx, db, true, `SELECT `+taskColumns+`, `+summaryColumns+
		` FROM tasks WHERE task_id = ? AND sum_received_id != 0 ORDER BY id LIMIT ?`, taskID, maxTraceEvents)
	if err != nil {
		return nil, fmt.Errorf("summarized rows: %w", err)
	}
	var out []Event
	for i := range rows {
		out = append(out, rows[i].summary.expand(&rows[i])...)
	}
	return out, nil
}
