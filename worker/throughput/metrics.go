package throughput

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the tracker's series; reason takes the Reasons values only.
type metrics struct {
	cost    prometheus.Counter
	speed   prometheus.Histogram
	skipped *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		cost: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "svc_task_cost_total",
			Help: "Sum of the costs of tasks with a valid cost label (throughput.cost_label).",
		}),
		speed: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "svc_task_speed_cost_per_second",
			Help:    "Per-task speed: cost divided by executor wall seconds.",
			Buckets: prometheus.ExponentialBucketsRange(0.001, 1e6, 19),
		}),
		skipped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "svc_task_cost_skipped_total",
			Help: "Tasks whose cost label was missing or invalid, by reason.",
		}, []string{"reason"}),
	}
	for _, r := range Reasons() {
		m.skipped.WithLabelValues(r)
	}
	if reg == nil {
		return m, nil
	}
	cs := []prometheus.Collector{m.cost, m.speed, m.skipped}
	for i, c := range cs {
		if err := reg.Register(c); err != nil {
			for _, done := range cs[:i] {
				reg.Unregister(done)
			}
			return nil, fmt.Errorf("register throughput metrics: %w", err)
		}
	}
	return m, nil
}
