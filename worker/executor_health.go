package worker

import (
	"context"
	"errors"
)

// ErrExecutorUnavailable is wrapped by the error of a task that did not
// run because the executor cannot run anything now: its binary cannot be
// started, or (mode persistent) no child gets ready. It is the worker's
// failure, not the message's: such a task is not dead-lettered and no
// attempt is charged for it.
var ErrExecutorUnavailable = errors.New("executor unavailable")

// Executor health states (ExecutorHealth.State).
const (
	// ExecutorAvailable: tasks run (mode persistent: a child is ready, or
	// children are being replaced without failing).
	ExecutorAvailable = "available"
	// ExecutorStarting: mode persistent before its first child is ready;
	// tasks wait for it.
	ExecutorStarting = "starting"
	// ExecutorUnavailable: the binary cannot be started, or no child gets
	// ready (start failures, crash loop, ready_timeout) and none is alive.
	ExecutorUnavailable = "unavailable"
)

// ExecutorHealth says whether the executor can run tasks now.
type ExecutorHealth struct {
	State string
	// Reason says why it is not available ("" when it is): short, without
	// the executor's output, fit for /readyz.
	Reason string
	// Detail is the error behind an unavailable executor (it may quote the
	// executor's stderr), for logs.
	Detail string
}

// Available reports whether tasks can run now.
func (h ExecutorHealth) Available() bool { return h.State == ExecutorAvailable || h.State == "" }

// ExecutorHealthSource is a TaskRunner that reports its executor's health
// (the executor pool does).
type ExecutorHealthSource interface {
	// ExecutorHealth is the health now.
	ExecutorHealth() ExecutorHealth
	// WatchExecutorHealth calls f with the health now and again on every
	// change, one call at a time, in order. f must be quick and must not
	// call back into the runner.
	WatchExecutorHealth(f func(ExecutorHealth))
}

type executorWaitKey struct{}

type executorWait struct{ stop <-chan struct{} }

// WaitForExecutor returns ctx marked so that a task run under it waits,
// uncharged, while the executor is unavailable, until the executor
// recovers, ctx ends, or stop is closed (nil: never); past stop the task
// ends with ErrExecutorUnavailable as soon as the executor is found
// unavailable. Without the mark a task ends with ErrExecutorUnavailable at
// once. The Kafka source's tasks wait (the worker pauses intake meanwhile
// and stop is the start of the drain); HTTP requests and probes do not
// (the caller is told 503 and retries).
func WaitForExecutor(ctx context.Context, stop <-chan struct{}) context.Context {
	return context.WithValue(ctx, executorWaitKey{}, executorWait{stop: stop})
}

// ExecutorWait reports whether a task run under ctx waits for an
// unavailable executor (WaitForExecutor), and the channel that ends the
// wait.
func ExecutorWait(ctx context.Context) (wait bool, stop <-chan struct{}) {
	w, ok := ctx.Value(executorWaitKey{}).(executorWait)
	return ok, w.stop
}
