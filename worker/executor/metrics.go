package executor

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the persistent pool's series.
type metrics struct {
	restarts     *prometheus.CounterVec
	violations   *prometheus.CounterVec
	crashLoops   prometheus.Counter
	crashLooping prometheus.Gauge
	ready        prometheus.Gauge
}

// newExecMetrics builds the series and registers them on reg (nil: kept
// private). Every restart reason starts at 0.
func newExecMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		restarts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "svc_executor_restarts_total",
			Help: "Persistent executor children replaced, by reason (start_failed, not_ready, exited, timeout, canceled, protocol, oversized, recycled).",
		}, []string{"reason"}),
		violations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "svc_executor_protocol_violations_total",
			Help: "Persistent executor children replaced for breaking protocol v2 after their ready frame, by kind (unsolicited_output, wrong_task, malformed_frame).",
		}, []string{"kind"}),
		crashLoops: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "svc_executor_crash_loops_total",
			Help: "Crash-loop episodes: persistent children dying repeatedly before answering a task.",
		}),
		crashLooping: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "svc_executor_crash_loop_active", Help: "1 while persistent children are in a crash loop (restarts back off).",
		}),
		ready: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "svc_executor_children_ready", Help: "Persistent executor children alive and past their ready frame.",
		}),
	}
	for _, r := range restartReasons {
		m.restarts.WithLabelValues(r)
	}
	for _, k := range violationKinds {
		m.violations.WithLabelValues(k)
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.restarts, m.violations, m.crashLoops, m.crashLooping, m.ready} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register executor metrics: %w", err)
		}
	}
	return m, nil
}
