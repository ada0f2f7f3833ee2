package root

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"svc/worker/fleet"
)

// loadReader reads the worker's load for its card from its own metrics, so
// the workers list and its Dashboard agree. Registry goroutine only.
type loadReader struct {
	g     prometheus.Gatherer
	kafka bool // the Kafka source runs
	now   func() time.Time

	lastTasks float64 // svc_tasks_total at the previous read
	lastAt    time.Time
}

func newLoadReader(g prometheus.Gatherer, kafka bool) *loadReader {
	return &loadReader{g: g, kafka: kafka, now: time.Now}
}

// read gathers the registry once; nil when it cannot be gathered.
func (r *loadReader) read() *fleet.Load {
	mfs, err := r.g.Gather()
	if err != nil && len(mfs) == 0 {
		return nil
	}
	fam := map[string][]*dto.Metric{}
	for _, mf := range mfs {
		fam[mf.GetName()] = mf.GetMetric()
	}
	sum := func(name string) float64 {
		var v float64
		for _, m := range fam[name] {
			switch {
			case m.GetGauge() != nil:
				v += m.GetGauge().GetValue()
			case m.GetCounter() != nil:
				v += m.GetCounter().GetValue()
			}
		}
		return v
	}
	l := &fleet.Load{
		TasksRunning: int64(sum("svc_executor_pool_busy")), PoolSize: int64(sum("svc_executor_pool_size")),
		StalledPartitions: int64(sum("svc_kafka_partitions_stalled")), Breakers: map[string]string{},
	}
	now, tasks := r.now(), sum("svc_tasks_total")
	if secs := now.Sub(r.lastAt).Seconds(); !r.lastAt.IsZero() && secs > 0 && tasks >= r.lastTasks {
		l.TasksPerSecond = (tasks - r.lastTasks) / secs
	}
	r.lastTasks, r.lastAt = tasks, now
	down := len(fam["svc_executor_healthy"]) > 0 && sum("svc_executor_healthy") == 0
	switch {
	case down:
		l.Intake = fleet.IntakeExecutorDown
	case !r.kafka:
		l.Intake = fleet.IntakeHTTPOnly
	case sum("svc_consume_pause_active") > 0:
		l.Intake = fleet.IntakePaused
	case sum("svc_backpressure_active") > 0:
		l.Intake = fleet.IntakeBackpressure
	default:
		l.Intake = fleet.IntakeFlowing
	}
	if r.kafka {
		parts, inflight := int64(len(fam["svc_partition_paused"])), int64(sum("svc_kafka_messages_in_flight"))
		l.Partitions, l.MessagesInFlight = &parts, &inflight
		l.PartitionsPaused, l.PartitionsStalled = flagged(fam["svc_partition_paused"]), flagged(fam["svc_partition_stalled"])
		if lags := fam["svc_consumer_lag"]; len(lags) > 0 {
			lag := int64(sum("svc_consumer_lag"))
			l.Lag = &lag
		}
	}
	sinks := fam["svc_sink_breaker_state"]
	slices.SortFunc(sinks, func(a, b *dto.Metric) int { return strings.Compare(label(a, "sink"), label(b, "sink")) })
	for _, m := range sinks[:min(len(sinks), fleet.MaxBreakers)] {
		l.Breakers[label(m, "sink")] = fleet.BreakerState(m.GetGauge().GetValue())
	}
	return l
}

// flagged lists the partitions whose series of a 0/1 gauge is 1, in
// order, at most fleet.MaxLoadPartitions.
func flagged(ms []*dto.Metric) []int32 {
	out := []int32{}
	for _, m := range ms {
		if m.GetGauge().GetValue() == 1 && len(out) < fleet.MaxLoadPartitions {
			if p, err := strconv.Atoi(label(m, "partition")); err == nil {
				out = append(out, int32(p))
			}
		}
	}
	slices.Sort(out)
	return out
}

func label(m *dto.Metric, name string) string {
	for _, lp := range m.GetLabel() {
		if lp.GetName() == name {
			return lp.GetValue()
		}
	}
	return ""
}
