package worker

import (
	"encoding/json"
	"sync/atomic"
	"time"

	"svc/recorder"
	"svc/worker/config"
)

// EventRecorder receives the pipeline's flight-recorder events and task
// rows. Both calls must not block (the recorder drops and counts when full).
type EventRecorder interface {
	Event(recorder.Event)
	Task(recorder.TaskRow)
}

// recording emits the pipeline's lifecycle events. Until a recorder is
// attached (or with the UI off) every call is a no-op.
type recording struct {
	rec    atomic.Pointer[EventRecorder]
	worker string
	env    map[string]string // executor.env, all values masked
}

// AttachRecorder sends the pipeline's events to rec. Call before Run.
func (a *App) AttachRecorder(rec EventRecorder) {
	a.recording.rec.Store(&rec)
	masked, _ := json.Marshal(a.Cfg.Masked())
	if r, ok := rec.(interface{ ConfigSnapshot(json.RawMessage) }); ok {
		r.ConfigSnapshot(masked)
	}
}

func (r *recording) get() EventRecorder {
	if p := r.rec.Load(); p != nil {
		return *p
	}
	return nil
}

func (r *recording) event(typ, kind, taskID string, labels map[string]string, payload any) {
	rec := r.get()
	if rec == nil {
		return
	}
	var raw json.RawMessage
	if payload != nil {
		raw, _ = json.Marshal(payload)
	}
	rec.Event(recorder.Event{TSms: time.Now().UnixMilli(), Type: typ, Kind: kind, TaskID: taskID, Worker: r.worker, Labels: labels, Payload: raw})
}

// receivedPayload is the payload of task_received.
type receivedPayload struct {
	Source         string `json:"source,omitempty"`
	Alias          string `json:"alias,omitempty"`
	Partition      *int32 `json:"partition,omitempty"`
	Offset         *int64 `json:"offset,omitempty"`
	Key            string `json:"key,omitempty"`
	KeyEncoding    string `json:"key_encoding,omitempty"`
	InputSizeBytes int    `json:"input_size_bytes"`
}

// attemptPayload is the payload of executor_started and executor_finished.
type attemptPayload struct {
	Attempt         int    `json:"attempt"`
	Status          string `json:"status,omitempty"`
	ExitCode        *int   `json:"exit_code,omitempty"`
	DurationMS      int64  `json:"duration_ms,omitempty"`
	OutputSizeBytes int    `json:"output_size_bytes,omitempty"`
	Error           string `json:"error,omitempty"`
	StderrTail      string `json:"stderr_tail,omitempty"`
}

// received records a task entering the pipeline with its message's place.
func (r *recording) received(t *Task) {
	if r.get() == nil {
		return
	}
	p := receivedPayload{InputSizeBytes: len(t.Input)}
	if m := t.Msg; m != nil {
		p.Source, p.Alias = m.Source, m.Alias
		if m.Source == SourceKafka {
			p.Partition, p.Offset = &m.Partition, &m.Offset
		}
		if m.Key != nil {
			p.Key, p.KeyEncoding = EncodeBytes(m.Key)
		}
	}
	r.event(recorder.TypeTaskReceived, "", t.ID, t.Labels, p)
}

// attempt records an executor start (res nil) or end.
func (r *recording) attempt(t *Task, n int, res *AttemptResult) {
	if r.get() == nil {
		return
	}
	if res == nil {
		r.event(recorder.TypeExecutorStarted, "", t.ID, nil, attemptPayload{Attempt: n})
		return
	}
	p := attemptPayload{Attempt: n, Status: res.Status, ExitCode: &res.ExitCode,
		DurationMS: res.Duration.Milliseconds(), OutputSizeBytes: len(res.Output)}
	if res.Err != nil {
		p.Error = res.Err.Error()
	}
	if len(res.Stderr) > 0 {
		tail := res.Stderr
		if len(tail) > 2048 {
			tail = tail[len(tail)-2048:]
		}
		p.StderrTail, _ = EncodeBytes(tail)
	}
	r.event(recorder.TypeExecutorFinished, "", t.ID, nil, p)
}

// finished records the task row and the executor's annotations.
func (r *recording) finished(source string, res *TaskResult) {
	rec := r.get()
	if rec == nil {
		return
	}
	t := res.Task
	for _, an := range res.Annotations {
		r.event(recorder.TypeAnnotation, an.Kind, t.ID, res.Labels, an.Payload)
	}
	row := recorder.TaskRow{
		TaskID: t.ID, TSms: time.Now().UnixMilli(), Worker: r.worker, Source: source, Labels: res.Labels,
		Status: res.Status, Attempts: res.Attempts, DurationMs: res.Duration.Milliseconds(),
		OutputSizeBytes: int64(len(res.Output)), Env: r.taskEnv(t), Partition: -1, Offset: -1,
	}
	if res.Err != nil {
		row.Error = res.Err.Error()
	}
	if m := t.Msg; m != nil {
		row.Alias = m.Alias
		if m.Source == SourceKafka {
			row.Partition, row.Offset = m.Partition, m.Offset
		}
		if m.Key != nil {
			row.Key, _ = EncodeBytes(m.Key)
		}
	}
	rec.Task(row)
}

// taskEnv is the environment a task ran with, redacted like config views:
// every executor.env value masked, task env masked by key name.
func (r *recording) taskEnv(t *Task) map[string]string {
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

// delivered records a result acknowledged by a sink.
func (r *recording) delivered(res *TaskResult, sink string) {
	r.event(recorder.TypeSinkDelivered, "", res.Task.ID, nil, map[string]any{"sink": sink, "output_size_bytes": len(res.Output)})
}

// deadLettered records a failed task written to the DLQ (or dropped).
func (r *recording) deadLettered(res *TaskResult, outcome, reason string) {
	r.event(recorder.TypeDLQSent, "", res.Task.ID, nil, map[string]any{"outcome": outcome, "reason": reason, "attempts": res.Attempts})
}

// state records a worker state change (lifecycle, breakers, pauses, stalls).
func (r *recording) state(name string, detail map[string]any) {
	if r == nil {
		return
	}
	rec := r.get()
	if rec == nil {
		return
	}
	if s, ok := rec.(interface{ State(string, map[string]any) }); ok {
		s.State(name, detail)
		return
	}
	r.event(recorder.TypeState, name, "", nil, detail)
}

// State records a worker lifecycle state (starting, running, draining,
// stopped) in the recorder's state timeline.
func (a *App) State(name string, detail map[string]any) { a.recording.state(name, detail) }
