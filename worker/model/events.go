package model

import (
	"encoding/json"
	"sync/atomic"
	"time"

	"svc/worker/config"
	"svc/worker/event"
	"svc/worker/payload"
)

// Events emits the pipeline's flight-recorder events. Until a recorder is
// attached every call is a no-op, and a nil *Events drops everything.
// Safe for concurrent use; no method blocks.
type Events struct {
	rec    atomic.Pointer[EventRecorder]
	worker string
	env    map[string]string // executor.env keys, every value masked
	// KeepOKTail (history.task_detail = "full") keeps the stdout tail of
	// a clean successful first attempt, which is otherwise not encoded.
	KeepOKTail bool
	// Deliveries, when set, is how many sinks an ok result goes to
	// (event.TaskRow.Deliveries).
	Deliveries func(source string, res *TaskResult) int
}

// NewEvents returns worker's emitter; executor.env keys go with every task.
func NewEvents(worker string, execEnv map[string]string) *Events {
	e := &Events{worker: worker}
	for k := range execEnv {
		if e.env == nil {
			e.env = map[string]string{}
		}
		e.env[k] = config.Mask
	}
	return e
}

// Attach sends every later event to rec.
func (r *Events) Attach(rec EventRecorder) { r.rec.Store(&rec) }

func (r *Events) get() EventRecorder {
	if r == nil {
		return nil
	}
	if p := r.rec.Load(); p != nil {
		return *p
	}
	return nil
}

// Event records one event of type typ.
func (r *Events) Event(typ, kind, taskID string, labels map[string]string, payload any) {
	rec := r.get()
	if rec == nil {
		return
	}
	var raw json.RawMessage
	valid := false
	switch p := payload.(type) {
	case nil:
	case json.RawMessage: // already JSON (an annotation's payload): no second encoding
		raw = p
	default:
		raw, _ = json.Marshal(payload)
		valid = true // fresh and valid: the recorder need not check or copy it
	}
	r.emit(rec, typ, kind, taskID, labels, raw, valid)
}

// emit hands one event to rec; valid: raw is fresh valid JSON the
// recorder need neither check nor copy. Per-task payloads are encoded by
// their concrete type's AppendJSON, not passed to Event as an interface
// (a heap copy each; TestEventsAllocs).
func (r *Events) emit(rec EventRecorder, typ, kind, taskID string, labels map[string]string, raw json.RawMessage, valid bool) {
	rec.Event(event.Event{TSms: time.Now().UnixMilli(), Type: typ, Kind: kind, TaskID: taskID, Worker: r.worker, Labels: labels, Payload: raw, PayloadValid: valid})
}

// eventTail bounds the stdout and stderr kept in an executor_finished event.
const eventTail = 2048

// tail returns the last eventTail bytes of b as UTF-8 text or base64.
func tail(b []byte) string {
	if len(b) > eventTail {
		b = b[len(b)-eventTail:]
	}
	s, _ := payload.Encode(b)
	return s
}

// Received records a task entering the pipeline with its message's place.
func (r *Events) Received(t *Task) {
	rec := r.get()
	if rec == nil {
		return
	}
	p := event.Received{InputSizeBytes: int64(len(t.Input))}
	if m := t.Msg; m != nil {
		p.Source, p.Alias = m.Source, m.Alias
		if m.Source == SourceKafka {
			p.Partition, p.Offset = &m.Partition, &m.Offset
		}
		if m.Key != nil {
			p.Key, p.KeyEncoding = payload.Encode(m.Key)
		}
	}
	r.emit(rec, event.TypeTaskReceived, "", t.ID, t.Labels, p.AppendJSON(make([]byte, 0, 128)), true)
}

// Attempt records an executor start (res nil) or end.
func (r *Events) Attempt(t *Task, n int, res *AttemptResult) {
	// For RunningTasks: n while attempt n runs, -n once it ended.
	v := int32(n)
	if res != nil {
		v = -v
	}
	atomic.StoreInt32(&t.attempt, v)
	rec := r.get()
	if rec == nil {
		return
	}
	if res == nil {
		p := event.Attempt{Attempt: n}
		r.emit(rec, event.TypeExecutorStarted, "", t.ID, t.Labels, p.AppendJSON(make([]byte, 0, 16)), true)
		return
	}
	p := event.Attempt{Attempt: n, Status: res.Status, ExitCode: &res.ExitCode,
		DurationMS: res.Duration.Milliseconds(), OutputSizeBytes: int64(len(res.Output))}
	if res.Err != nil {
		p.Error = res.Err.Error()
	}
	if len(res.Stderr) > 0 {
		p.StderrTail = tail(res.Stderr)
	}
	if len(res.Output) > 0 && (r.KeepOKTail || n > 1 || res.Status != StatusOK || len(res.Stderr) > 0 || res.Err != nil) {
		p.StdoutTail = tail(res.Output)
	}
	r.emit(rec, event.TypeExecutorFinished, "", t.ID, t.Labels, p.AppendJSON(make([]byte, 0, 128)), true)
}

// Finished records the task row and the executor's annotations.
func (r *Events) Finished(source string, res *TaskResult) {
	rec := r.get()
	if rec == nil {
		return
	}
	t := res.Task
	for _, an := range res.Annotations {
		r.emit(rec, event.TypeAnnotation, an.Kind, t.ID, res.Labels, an.Payload, false) // checked and copied by the recorder
	}
	row := event.TaskRow{
		TaskID: t.ID, TSms: time.Now().UnixMilli(), Worker: r.worker, Source: source, Labels: res.Labels,
		Status: res.Status, Attempts: res.Attempts, DurationMs: res.Duration.Milliseconds(),
		OutputSizeBytes: int64(len(res.Output)), Env: r.taskEnv(t), Partition: -1, Offset: -1,
	}
	if res.Err != nil {
		row.Error = res.Err.Error()
	}
	if r.Deliveries != nil && res.Status == StatusOK {
		row.Deliveries = r.Deliveries(source, res)
	}
	if m := t.Msg; m != nil {
		row.Alias = m.Alias
		if m.Source == SourceKafka {
			row.Partition, row.Offset = m.Partition, m.Offset
		}
		if m.Key != nil {
			row.Key, row.KeyEncoding = payload.Encode(m.Key)
			if row.Env == nil {
				row.Env = keyEncodingEnvs[row.KeyEncoding]
			} else { // taskEnv's own copy
				row.Env[KeyEncodingEnv] = row.KeyEncoding
			}
		}
	}
	rec.Task(row)
}

// keyEncodingEnvs are the shared, read-only envs of keyed task rows
// without executor.env or task env, by key encoding.
var keyEncodingEnvs = map[string]map[string]string{
	payload.UTF8:   {KeyEncodingEnv: payload.UTF8},
	payload.Base64: {KeyEncodingEnv: payload.Base64},
}

// KeyEncodingEnv is the executor variable holding the key's encoding.
const KeyEncodingEnv = "SVC_KEY_ENCODING"

// taskEnv is a task's environment redacted: executor.env values masked,
// task env masked by key name.
func (r *Events) taskEnv(t *Task) map[string]string {
	if len(r.env) == 0 && len(t.Env) == 0 {
		return nil
	}
	out := config.MaskEnv(t.Env)
	if out == nil {
		out = map[string]string{}
	}
	for k, v := range r.env {
		out[k] = v
	}
	return out
}

// Delivered records a result acknowledged by a sink.
func (r *Events) Delivered(res *TaskResult, sink string) {
	rec := r.get()
	if rec == nil {
		return
	}
	p := event.Delivered{OutputSizeBytes: int64(len(res.Output)), Sink: sink}
	r.emit(rec, event.TypeSinkDelivered, "", res.Task.ID, res.Labels, p.AppendJSON(make([]byte, 0, 64)), true)
}

// TransactionAbortedKind is the annotation kind of a task whose results
// exactly-once delivery discarded (its transaction aborted); the message
// runs again as a new task.
const TransactionAbortedKind = "svc.transaction_aborted"

// TransactionAborted marks res as an aborted attempt (TransactionAbortedKind).
func (r *Events) TransactionAborted(res *TaskResult, reason string) {
	if r.get() == nil {
		return
	}
	r.Event(event.TypeAnnotation, TransactionAbortedKind, res.Task.ID, res.Labels, map[string]any{"reason": reason})
}

// DLQRecordAt is a DLQ record's partition and offset in the DLQ topic.
type DLQRecordAt struct {
	Partition int32
	Offset    int64
}

// DeadLettered records a failed task sent to the DLQ (at) or dropped.
func (r *Events) DeadLettered(res *TaskResult, outcome, reason string, at *DLQRecordAt) {
	p := map[string]any{"outcome": outcome, "reason": reason, "attempts": res.Attempts}
	if at != nil {
		p["dlq_partition"], p["dlq_offset"] = at.Partition, at.Offset
	}
	r.Event(event.TypeDLQSent, "", res.Task.ID, res.Labels, p)
}

// State records a worker state change in the recorder's state timeline.
func (r *Events) State(name string, detail map[string]any) {
	if rec := r.get(); rec != nil {
		rec.State(name, detail)
	}
}

// Committed records an offset commit (partition → next offset).
func (r *Events) Committed(offsets map[int32]int64) {
	r.Event(event.TypeOffsetCommitted, "", "", nil, map[string]any{"offsets": offsets})
}
