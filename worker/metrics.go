package worker

import (
	"runtime/debug"
	"svc/worker/model"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Version is the worker's release, set at build time with
// -ldflags "-X svc/worker.Version=v1.2.3".
var Version = "dev"

// NewRegistry returns the worker's own Prometheus registry with the Go and
// process collectors and svc_build_info.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	goVersion := "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		goVersion = bi.GoVersion
	}
	info := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "svc_build_info",
		Help:        "Build information of the running worker; always 1.",
		ConstLabels: prometheus.Labels{"version": Version, "goversion": goVersion},
	})
	info.Set(1)
	reg.MustRegister(info)
	return reg
}

// Metrics are the pipeline's own series. Labels take bounded values only:
// source (kafka, http, probe) and status (ok, failed, timeout).
type Metrics struct {
	Tasks            *prometheus.CounterVec
	ProbeTasks       *prometheus.CounterVec // probes, apart from svc_tasks_total
	TaskDuration     *prometheus.HistogramVec
	Attempts         *prometheus.CounterVec
	ArrangeErrors    *prometheus.CounterVec
	CompleteErrors   *prometheus.CounterVec
	LabelsDropped    *prometheus.CounterVec
	OffloadQueueWait prometheus.Histogram
}

// newMetrics registers the pipeline metrics and the executor pool gauges.
func newMetrics(reg prometheus.Registerer, pool model.PoolStats) *Metrics {
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	}
	m := &Metrics{
		Tasks: counter("svc_tasks_total",
			"Tasks finished, by source and final status (probes are counted apart, in svc_probe_tasks_total).", "source", "status"),
		ProbeTasks: counter("svc_probe_tasks_total",
			"Probe tasks (the debug probe) finished, by final status; never in svc_tasks_total.", "status"),
		TaskDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "svc_task_duration_seconds", Help: "Wall time of a task over all its attempts.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"source"}),
		Attempts: counter("svc_executor_attempts_total", "Executor process runs, by source.", "source"),
		ArrangeErrors: counter("svc_arrange_errors_total",
			"Handler arrange hooks (Arrange, ArrangeHTTPRequest) that returned an error, by source.", "source"),
		CompleteErrors: counter("svc_complete_errors_total",
			"Handler completion hooks (OnHTTPRequestComplete) that returned an error, by source.", "source"),
		LabelsDropped: counter("svc_task_labels_dropped_total",
			"Task labels dropped for being past the bounds (32 labels, 64-byte names, 1 KiB values), by source.", "source"),
		OffloadQueueWait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "svc_offload_wait_seconds", Help: "Time hook work waited for an offload thread.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 8),
		}),
	}
	reg.MustRegister(m.Tasks, m.ProbeTasks, m.TaskDuration, m.Attempts, m.ArrangeErrors, m.CompleteErrors, m.LabelsDropped, m.OffloadQueueWait)
	// Every series exists from start-up at 0.
	for _, source := range []string{model.SourceKafka, model.SourceHTTP, model.SourceProbe} {
		m.ArrangeErrors.WithLabelValues(source)
		m.LabelsDropped.WithLabelValues(source)
		m.Attempts.WithLabelValues(source)
	}
	m.CompleteErrors.WithLabelValues(model.SourceHTTP)
	gauge := func(name, help string, f func() int) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 { return float64(f()) })
	}
	reg.MustRegister(
		gauge("svc_executor_pool_busy", "Executor processes running now.", pool.Busy),
		gauge("svc_executor_pool_size", "Executor pool size (executor.pool_size).", pool.Size),
		gauge("svc_executor_pool_waiting", "Tasks waiting for a free executor slot.", pool.Waiting),
	)
	return m
}
