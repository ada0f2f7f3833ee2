package main

import (
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"svc/recorder"
	"svc/worker"
	"svc/worker/config"
	"svc/worker/runtimehealth"
	"svc/worker/throughput"
)

// newMonitors builds the runtime health monitor (nil when
// runtime_health.enabled is false) and the task cost tracker (disabled
// without throughput.cost_label). The monitor's samples and stalls become
// runtime_health recorder events.
func newMonitors(cfg *config.Config, events *worker.Events, pool worker.PoolStats, reg prometheus.Registerer, log *slog.Logger) (*runtimehealth.Monitor, *throughput.Tracker, error) {
	tracker, err := throughput.New(throughput.Options{
		CostLabel: cfg.Throughput.CostLabel, Window: cfg.Throughput.Window.D(),
		Registerer: reg, Logger: log.With("component", "throughput"),
	})
	if err != nil {
		return nil, nil, fmt.Errorf("throughput: %w", err)
	}
	if !cfg.RuntimeHealth.Enabled {
		return nil, tracker, nil
	}
	monitor, err := runtimehealth.New(runtimehealth.Options{
		Interval: cfg.RuntimeHealth.Interval.D(), StallThreshold: cfg.RuntimeHealth.StallThreshold.D(),
		Registerer: reg, Logger: log.With("component", "runtime_health"),
		Emit: func(kind string, payload any) {
			events.Event(recorder.TypeRuntimeHealth, kind, "", nil, payload)
		},
		PoolQueue: func() (int, int, int) { return pool.Busy(), pool.Size(), pool.Waiting() },
	})
	if err != nil {
		return nil, nil, fmt.Errorf("runtime health: %w", err)
	}
	return monitor, tracker, nil
}
