package worker

import (
	"context"
	"errors"
	"fmt"
	"svc/worker/model"
)

// HandlerError is a handler hook (arrange or complete) that failed; the
// ingress answers 500 with its text.
type HandlerError struct {
	Hook string
	Err  error
}

func (e *HandlerError) Error() string { return fmt.Sprintf("handler %s: %v", e.Hook, e.Err) }
func (e *HandlerError) Unwrap() error { return e.Err }

// HandleHTTP runs one ingress request: arrange, tasks, sinks (when
// sources.http.sinks_enabled), completion hook; once arranged, its work
// finishes even if ctx ends. While the executor is unavailable the error
// wraps ErrExecutorUnavailable and nothing is delivered.
func (a *App) HandleHTTP(ctx context.Context, req *model.HTTPRequest) (*model.HTTPResponse, error) {
	if err := a.executorUnavailable(); err != nil {
		return nil, err
	}
	tasks, err := Call(ctx, a.offload, func() ([]model.Task, error) { return a.arrange.ArrangeHTTPRequest(req) })
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		a.metrics.ArrangeErrors.WithLabelValues(model.SourceHTTP).Inc()
		return nil, &HandlerError{Hook: "ArrangeHTTPRequest", Err: err}
	}
	ctx = context.WithoutCancel(ctx)
	for i := range tasks {
		if tasks[i].Msg == nil {
			tasks[i].Msg = &model.Message{Source: model.SourceHTTP, Key: req.Key, Value: req.Body}
		}
		if tasks[i].ID == "" {
			tasks[i].ID = a.ids.Next()
		}
		tasks[i].RequestID = req.ID
	}
	results := a.RunTasks(ctx, model.SourceHTTP, tasks)
	if err := unrun(results); err != nil {
		return nil, err
	}
	if a.cfg.Sources.HTTP.SinksEnabled {
		for i := range results {
			if err := a.Deliver(&results[i]); err != nil {
				return nil, fmt.Errorf("deliver task %s: %w", results[i].Task.ID, err)
			}
		}
	}
	resp, err := Call(ctx, a.offload, func() (*model.HTTPResponse, error) { return a.complete.OnHTTPRequestComplete(req, results) })
	if err != nil {
		a.metrics.CompleteErrors.WithLabelValues(model.SourceHTTP).Inc()
		return nil, &HandlerError{Hook: "OnHTTPRequestComplete", Err: err}
	}
	return resp, nil
}

// unrun is the error of the first result not run for an unavailable
// executor, else nil.
func unrun(results []model.TaskResult) error {
	for i := range results {
		if errors.Is(results[i].Err, model.ErrExecutorUnavailable) {
			return fmt.Errorf("task %s: %w", results[i].Task.ID, results[i].Err)
		}
	}
	return nil
}
