package model

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"svc/worker/event"
)

// TaskRunner runs one task to its final result, all attempts included
// (the executor pool). Run is safe for concurrent use, orders nothing, and
// when ctx ends returns a failed result whose Err wraps ctx.Err().
type TaskRunner interface {
	Run(ctx context.Context, t *Task) TaskResult
}

// PoolStats reports the executor pool's occupancy; safe for concurrent use.
type PoolStats interface {
	Busy() int    // processes running now
	Size() int    // executor.pool_size
	Waiting() int // tasks waiting for a free slot
}

// Deliverer sends an ok result to its sinks and a failed one to the DLQ
// (worker/sink). Deliver is safe for concurrent use, blocks while a breaker
// is open, and returns nil once the result is out, ErrDeliveryStalled, or
// ctx.Err(). One caller's results are delivered in call order.
type Deliverer interface {
	Deliver(ctx context.Context, res *TaskResult) error
}

// AsyncDeliverer delivers without holding its caller: DeliverAsync calls
// done exactly once, on another goroutine, with Deliver's error.
type AsyncDeliverer interface {
	DeliverAsync(ctx context.Context, res *TaskResult, done func(error))
}

// ErrDeliveryStalled says a failed result could not reach the DLQ under
// dlq.on_send_failure = "stall": the message stays uncommitted.
var ErrDeliveryStalled = errors.New("dlq send failed: partition stalled (dlq.on_send_failure = stall)")

// EventRecorder stores flight-recorder events, task rows, state changes
// and config snapshots (the recorder). Its methods are safe for concurrent
// use and never block (a full queue drops and counts).
type EventRecorder interface {
	Event(event.Event)
	Task(event.TaskRow)
	State(name string, detail map[string]any)
	ConfigSnapshot(json.RawMessage)
}

// TaskCache joins executor runs to the handler cache (worker/cache):
// Prepare adds cached values to a task's environment right before it runs
// (undo restores it), Commit stores its fd 3 writes right after. Both are
// safe for concurrent use and never fail the task.
type TaskCache interface {
	Prepare(t *Task) (undo func())
	Commit(source string, res *TaskResult)
}

// CostObserver accounts each finished task's cost (throughput.cost_label);
// ok is false when the task carries no usable cost.
type CostObserver interface {
	Observe(labels map[string]string, wall time.Duration) (cost, speed float64, ok bool)
}

// CostKind is the annotation kind that carries a task's cost and speed.
const CostKind = "svc.cost"
