package worker

import (
	"context"
	"errors"
	"svc/worker/model"
	"time"
)

// ProbeQueueSize bounds the probes running or waiting at once.
const ProbeQueueSize = 16

// Probe errors; the UI server answers 503 to both.
var (
	ErrProbeQueueFull = errors.New("the probe queue is full: retry shortly")
	ErrClosing        = errors.New("the worker is shutting down")
)

// ProbeRequest is a message an operator runs through the live handler.
type ProbeRequest struct {
	Key     []byte
	Value   []byte
	Headers []model.Header
	Labels  map[string]string
}

// Probe runs caller bytes through the live handler (Kafka's when on, else
// the HTTP hooks) and the executor pool as source "probe": no sink, no
// offset. While the executor is unavailable the error wraps
// ErrExecutorUnavailable.
func (a *App) Probe(ctx context.Context, req ProbeRequest) ([]model.TaskResult, error) {
	if a.Closing() {
		return nil, ErrClosing
	}
	if err := a.executorUnavailable(); err != nil {
		return nil, err
	}
	select {
	case a.probes <- struct{}{}:
	default:
		return nil, ErrProbeQueueFull
	}
	defer func() { <-a.probes }()
	msg := &model.Message{Source: model.SourceProbe, Alias: "probe", Partition: -1, Offset: -1, Key: req.Key, Value: req.Value,
		Headers: req.Headers, Timestamp: time.Now()}
	tasks, err := Call(ctx, a.offload, func() ([]model.Task, error) {
		if a.kafka != nil {
			return a.kafka.Arrange([]model.Message{*msg})
		}
		return a.arrange.ArrangeHTTPRequest(&model.HTTPRequest{ID: a.ids.Next(), Body: req.Value, Key: req.Key, Labels: req.Labels})
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &HandlerError{Hook: "Arrange (probe)", Err: err}
	}
	for i := range tasks {
		t := &tasks[i]
		if t.ID == "" {
			t.ID = a.ids.Next()
		}
		pm := *msg // whatever the handler returned, the task is a probe
		if t.Msg != nil {
			pm.Key, pm.Value = t.Msg.Key, t.Msg.Value
		}
		t.Msg = &pm
		for k, v := range req.Labels {
			t.Labels = setLabel(t.Labels, k, v)
		}
	}
	results := a.RunTasks(ctx, model.SourceProbe, tasks)
	if err := unrun(results); err != nil {
		return nil, err
	}
	return results, nil
}

// ProbeQueue reports the probes running or waiting now and the queue size.
func (a *App) ProbeQueue() (used, size int) { return len(a.probes), cap(a.probes) }
