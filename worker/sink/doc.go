// Package sink delivers task results out of the worker: Set.Deliver sends
// an ok result to its named Kafka sinks (every sink, or the ones the task
// names) and a failed one to the dead-letter queue.
//
// Each sink is a franz-go producer (acks=all, idempotent) behind its own
// circuit breaker (breaker.go: closed → open after
// breaker.failure_threshold consecutive failures → half-open after
// breaker.open_timeout, one trial). While a breaker is open, delivery waits
// and nothing is dropped; the waiting work fills the Kafka source's queues
// and backpressure pauses intake. The DLQ (dlq.go) writes the original key,
// value and headers plus the svc-dlq-* headers; when it cannot write,
// dlq.on_send_failure decides: "stall" returns worker.ErrDeliveryStalled
// (the partition stops until restart or revoke) and "drop" counts, logs and
// lets the offset commit past it. Without a DLQ (no Kafka source and no
// dlq.topic) failures are dropped, warned once and counted.
//
// A record must fit its topic's max.message.bytes (limit.go: learned from
// the brokers, asked again after a refusal and for a record over an old
// limit). A changed limit replaces the producers (producer.go: franz-go
// reads a partition's batch cap once). A broker refuses a whole batch as
// too large, small records included: a refused record within the limit
// is produced again, batched within a lowered limit or alone (alone.go),
// and only one refused alone goes to the DLQ for its size. Exactly-once
// (stage.go) aborts instead, asks the brokers before the messages are
// staged again, and has the source renew its session when the
// transactional producer's batch cap is stale.
//
// The lifecycle closes the Set once, after the drain: every producer is
// flushed at once under one 5 s bound.
package sink
