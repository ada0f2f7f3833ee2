// Package kafka is the consumer-group input source of the worker: a poll
// loop, per-partition and per-key queues, offset commits, rebalance
// callbacks, the operator's consume pause, backpressure and the consumer
// lag view.
//
// # Intake
//
// A polled message is running (its tasks run, at most
// pipeline.max_in_flight at once; then its results are delivered, at most
// 4 × that many at once) or waiting (behind an earlier message of its key
// in its partition, or for a free slot). Free slots go to the
// partitions in turn. Too much waiting work pauses fetching: of one
// partition (its own queue) or of the whole topic (all queues together,
// backpressure). The operator's consume pause pauses the topic; a failed
// DLQ send under "stall" pauses its partition until restart or revoke.
// flowControl is the only place that pauses or resumes fetching.
//
// # Offsets
//
// The commit point of a partition is its highest contiguous finished
// offset + 1, committed every sources.kafka.commit_interval (never while
// the consume pause is active), at its end, on revoke and at shutdown.
//
// # Delivery
//
// At-least-once (commit.go) or exactly-once (txn.go) is a committer
// chosen once where the source is built (Delivery); the poll loop, the
// queues and the rebalance callbacks are the same for both.
//
// # Locks
//
// Source.commitMu → Source.mu → flowControl.mu → franz-go client;
// offsetCache.mu is a leaf.
package kafka
