// Package kafka is the consumer-group input source of the worker: a poll
// loop, per-partition and per-key queues, offset commits, rebalance
// callbacks, the operator's consume pause, backpressure and the consumer
// lag view.
//
// Intake (queue.go, dispatch.go): a polled message is running (its tasks,
// at most pipeline.max_in_flight at once, then its results' delivery) or
// waiting (behind an earlier message of its key, or for a free slot). Too
// much waiting work pauses fetching of one partition or of the topic;
// flowControl is the only place that pauses or resumes fetching.
//
// Offsets: a partition's commit point is its highest contiguous finished
// offset + 1. Delivery: at-least-once (commit.go) or exactly-once (txn.go)
// is a committer chosen once (Delivery); the rest is the same for both.
// Behaviour: docs/operations.md, "Delivery guarantees" to "Consumer group".
//
// # Locks
//
// Source.commitMu → Source.mu → flowControl.mu → franz-go client;
// offsetCache.mu is a leaf.
package kafka
