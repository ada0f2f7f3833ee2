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

// Bounds of a Load: a reader drops a load past them.
const (
	MaxBreakers       = 32   // sinks named
	MaxLoadPartitions = 4096 // partitions listed as paused or stalled
	maxLoadCount      = 1 << 40
)

// Breaker states of a Load.
const (
	BreakerClosed   = "closed"
	BreakerOpen     = "open"
	BreakerHalfOpen = "half-open"
)

// Load is a worker's work at a heartbeat, read from its own metrics and
// put on its card, so the workers list needs no request to the others;
// docs/api.md (load.*) describes each field. Pointer fields are null where
// they do not apply (no Kafka source) or are not known yet.
type Load struct {
	Partitions        *int64            `json:"partitions"`
	MessagesInFlight  *int64            `json:"messages_in_flight"`
	TasksRunning      int64             `json:"tasks_running"`
	PoolSize          int64             `json:"pool_size"`
	TasksPerSecond    float64           `json:"tasks_per_second"` // since the previous heartbeat
	Lag               *int64            `json:"lag"`
	Intake            string            `json:"intake"` // an Intake* state
	StalledPartitions int64             `json:"stalled_partitions"`
	PartitionsPaused  []int32           `json:"partitions_paused"`
	PartitionsStalled []int32           `json:"partitions_stalled"`
	Breakers          map[string]string `json:"breakers"` // sink → breaker state
}

// clean returns a copy of l, or nil when it is not a plausible load.
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
