package fleet

import (
	"maps"
	"math"
	"slices"
)

// Intake states of a Load.
const (
	IntakeFlowing      = "flowing"              // Kafka intake runs
	IntakePaused       = "paused"               // an operator's consume pause holds it
	IntakeBackpressure = "backpressure"         // too much polled work waits to run
	IntakeExecutorDown = "executor_unavailable" // the executor cannot run anything
	IntakeHTTPOnly     = "http_only"            // no Kafka source: nothing to pause
)

// MaxBreakers is how many sinks a Load names at most (a reader drops a
// load naming more).
const MaxBreakers = 32

// Breaker states of a Load.
const (
	BreakerClosed   = "closed"
	BreakerOpen     = "open"
	BreakerHalfOpen = "half-open"
)

// Bounds on a Load read from a card, which anyone who can write the
// folder may have written.
const (
	maxLoadCount = 1 << 40
	// MaxLoadPartitions is how many partitions a Load lists as paused or
	// stalled at most (a reader drops a load listing more).
	MaxLoadPartitions = 4096
)

// Load is what a worker reports of its work on its card at every
// heartbeat, read from its own metrics then: the workers list shows it
// for every worker without asking each one. Cards of earlier releases and
// stopped workers carry none (null). Pointer fields are null where they
// do not apply (no Kafka source) or are not known yet (lag before the
// first offsets read).
type Load struct {
	// Partitions is how many source partitions the worker owns.
	Partitions *int64 `json:"partitions"`
	// MessagesInFlight are Kafka messages running (svc_kafka_messages_in_flight).
	MessagesInFlight *int64 `json:"messages_in_flight"`
	// TasksRunning and PoolSize: executor processes busy, and the pool's size.
	TasksRunning int64 `json:"tasks_running"`
	PoolSize     int64 `json:"pool_size"`
	// TasksPerSecond are tasks finished per second since the previous
	// heartbeat (0 on the first).
	TasksPerSecond float64 `json:"tasks_per_second"`
	// Lag is the messages of its partitions not yet committed by the
	// group (svc_consumer_lag summed).
	Lag *int64 `json:"lag"`
	// Intake is one of the Intake* states; StalledPartitions are
	// stall-paused after a failed DLQ send.
	Intake            string `json:"intake"`
	StalledPartitions int64  `json:"stalled_partitions"`
	// PartitionsPaused and PartitionsStalled list the source partitions
	// whose fetching is paused (for any reason) and those stall-paused (at
	// most MaxLoadPartitions each; null without a Kafka source), so any
	// worker can show the whole group's pauses.
	PartitionsPaused  []int32 `json:"partitions_paused"`
	PartitionsStalled []int32 `json:"partitions_stalled"`
	// Breakers maps each sink to its circuit breaker's state (at most 32
	// sinks, by name).
	Breakers map[string]string `json:"breakers"`
}

// clean returns l as a reader may show it, or nil when it is not a
// plausible load: counts out of range, an unknown intake or breaker
// state, bad sink names, too many sinks.
func (l *Load) clean() *Load {
	if l == nil {
		return nil
	}
	count := func(p *int64) bool { return p == nil || (*p >= 0 && *p <= maxLoadCount) }
	switch {
	case !count(l.Partitions) || !count(l.MessagesInFlight) || !count(l.Lag),
		!count(&l.TasksRunning) || !count(&l.PoolSize) || !count(&l.StalledPartitions),
		math.IsNaN(l.TasksPerSecond) || math.IsInf(l.TasksPerSecond, 0) || l.TasksPerSecond < 0 || l.TasksPerSecond > maxLoadCount,
		!slices.Contains([]string{IntakeFlowing, IntakePaused, IntakeBackpressure, IntakeExecutorDown, IntakeHTTPOnly}, l.Intake),
		len(l.Breakers) > MaxBreakers, !partitionList(l.PartitionsPaused), !partitionList(l.PartitionsStalled):
		return nil
	}
	for name, st := range l.Breakers {
		if !namePattern.MatchString(name) || (st != BreakerClosed && st != BreakerOpen && st != BreakerHalfOpen) {
			return nil
		}
	}
	c := *l
	c.Breakers = maps.Clone(l.Breakers)
	c.PartitionsPaused, c.PartitionsStalled = slices.Clone(l.PartitionsPaused), slices.Clone(l.PartitionsStalled)
	return &c
}

// partitionList tells whether ps is a plausible list of partitions.
func partitionList(ps []int32) bool {
	if len(ps) > MaxLoadPartitions {
		return false
	}
	for _, p := range ps {
		if p < 0 {
			return false
		}
	}
	return true
}

// BreakerState names a svc_sink_breaker_state value (0, 1, 2).
func BreakerState(v float64) string {
	switch v {
	case 1:
		return BreakerOpen
	case 2:
		return BreakerHalfOpen
	}
	return BreakerClosed
}
