// Package sink delivers task results out of the worker: Set.Deliver sends
// an ok result to its named Kafka sinks (every sink, or the ones the task
// names) and a failed one to the dead-letter queue.
//
// Each sink is an idempotent acks=all producer behind its own circuit
// breaker (breaker.go). While a breaker is open, delivery waits and
// nothing is dropped: backpressure pauses intake. The DLQ (dlq.go) writes
// the original message plus the svc-dlq-* headers; when it cannot write,
// dlq.on_send_failure decides between stalling the partition and
// dropping. A record must fit its topic's max.message.bytes (limit.go);
// a record a broker refused in a batch is produced again, batched within
// a lowered limit or alone (alone.go), and only one refused alone goes to
// the DLQ for its size. Exactly-once staging is in stage.go. See
// docs/operations.md for what an operator sees of each.
package sink
