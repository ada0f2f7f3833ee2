package model

import (
	"context"
	"errors"
)

// ErrExecutorUnavailable is wrapped by the error of a task that did not
// run because the executor cannot run anything now: the worker's failure,
// not the message's (no DLQ, no attempt charged).
var ErrExecutorUnavailable = errors.New("executor unavailable")

// Executor health states (ExecutorHealth.State).
const (
	ExecutorAvailable   = "available"
	ExecutorStarting    = "starting" // mode persistent before its first child is ready
	ExecutorUnavailable = "unavailable"
)

// ExecutorHealth says whether the executor can run tasks now.
type ExecutorHealth struct {
	State  string
	Reason string // why it is not available, fit for /readyz
	Detail string // the error behind it (may quote stderr), for logs
}

// Available reports whether tasks can run now.
func (h ExecutorHealth) Available() bool { return h.State == ExecutorAvailable || h.State == "" }

// ExecutorHealthSource is a TaskRunner that reports its executor's health.
// WatchExecutorHealth calls f now and on every change, in order; f must be
// quick and not call back into the runner.
type ExecutorHealthSource interface {
	ExecutorHealth() ExecutorHealth
	WatchExecutorHealth(f func(ExecutorHealth))
}

type executorWaitKey struct{}

type executorWait struct{ stop <-chan struct{} }

// WaitForExecutor marks ctx so that a task run under it waits, uncharged,
// while the executor is unavailable, until it recovers, ctx ends or stop
// closes; without the mark such a task ends with ErrExecutorUnavailable at
// once. Kafka tasks wait; HTTP requests and probes answer 503.
func WaitForExecutor(ctx context.Context, stop <-chan struct{}) context.Context {
	return context.WithValue(ctx, executorWaitKey{}, executorWait{stop: stop})
}

// ExecutorWait reports whether ctx has WaitForExecutor's mark, and its stop.
func ExecutorWait(ctx context.Context) (wait bool, stop <-chan struct{}) {
	w, ok := ctx.Value(executorWaitKey{}).(executorWait)
	return ok, w.stop
}
