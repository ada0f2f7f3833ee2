package worker

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"svc/worker/event"
)

// TaskRunner runs one task to its final result, all attempts included. The
// executor pool (worker/executor) implements it.
//
// Run is safe for concurrent use and gives no ordering between tasks:
// callers that need per-key order must not start the next task of a key
// before the previous Run returned. Run honours ctx: when it ends, the
// result is failed and its Err wraps ctx.Err(), so a shutdown can be told
// from an executor failure.
type TaskRunner interface {
	Run(ctx context.Context, t *Task) TaskResult
}

// PoolStats reports the executor pool's occupancy for metrics and the
// runtime monitor. Every method is safe for concurrent use.
type PoolStats interface {
	Busy() int    // processes running now
	Size() int    // executor.pool_size
	Waiting() int // tasks waiting for a free slot
}

// Deliverer sends a finished task's result where it belongs: an ok result
// to its sinks, a failed one to the dead-letter queue. worker/sink
// implements it.
//
// Deliver is safe for concurrent use. It blocks while a sink's breaker is
// open (nothing is dropped) and returns nil once the result is safely out,
// ErrDeliveryStalled when a failed result could not reach the DLQ and the
// policy is to stall, or ctx.Err() when ctx ends first. Results of one
// caller are delivered in call order; there is no order between callers.
type Deliverer interface {
	Deliver(ctx context.Context, res *TaskResult) error
}

// AsyncDeliverer is a Deliverer that can also deliver without holding its
// caller: DeliverAsync calls done exactly once, on another goroutine, with
// what Deliver would have returned. worker/sink implements it.
type AsyncDeliverer interface {
	DeliverAsync(ctx context.Context, res *TaskResult, done func(error))
}

// ErrDeliveryStalled says a failed result could not be written to the DLQ
// under dlq.on_send_failure = "stall": its message must stay uncommitted
// and its partition stops.
var ErrDeliveryStalled = errors.New("dlq send failed: partition stalled (dlq.on_send_failure = stall)")

// EventRecorder stores the pipeline's flight-recorder events, task rows,
// state changes and config snapshots; the recorder package implements it.
//
// Every method is safe for concurrent use and must not block: a full
// write queue drops and counts instead. Events of one goroutine are stored
// in call order.
type EventRecorder interface {
	Event(event.Event)
	Task(event.TaskRow)
	State(name string, detail map[string]any)
	ConfigSnapshot(json.RawMessage)
}

// TaskCache joins executor runs to the handler cache; worker/cache
// implements it. The App calls Prepare right before a task runs and
// Commit right after, before the result is recorded or delivered.
//
// Both are safe for concurrent use and never fail the task: problems are
// counted and, for writes, annotated on the result.
type TaskCache interface {
	// Prepare adds the cache values the task reads to its environment; the
	// returned func puts the environment back as it was.
	Prepare(t *Task) (undo func())
	// Commit stores the result's cache writes (fd 3).
	Commit(source string, res *TaskResult)
}

// CostObserver accounts the cost of each finished task (the numeric label
// named by throughput.cost_label); worker/throughput implements it.
// Observe is safe for concurrent use and returns ok false when the task
// carries no usable cost.
type CostObserver interface {
	Observe(labels map[string]string, wall time.Duration) (cost, speed float64, ok bool)
}

// CostKind is the annotation kind that carries a task's cost and speed.
const CostKind = "svc.cost"
