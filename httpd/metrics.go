package httpd

import (
	"svc/recorder"

	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

func promhttpHandler(reg *prometheus.Registry) http.Handler {
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg, EnableOpenMetrics: false})
}

// ingressMetrics are the HTTP ingress series. client takes configured client
// names only ("anonymous" without clients, "unknown" before authentication).
type ingressMetrics struct {
	requests   *prometheus.CounterVec
	rejections *prometheus.CounterVec
	inFlight   prometheus.Gauge
	duration   prometheus.Histogram
}

func newIngressMetrics(reg prometheus.Registerer) *ingressMetrics {
	m := &ingressMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "svc_ingress_requests_total", Help: "HTTP ingress requests answered, by client and status code.",
		}, []string{"client", "code"}),
		rejections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "svc_ingress_rejections_total", Help: "HTTP ingress requests refused before the pipeline, by reason.",
		}, []string{"reason"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "svc_ingress_in_flight_requests", Help: "HTTP ingress requests in the pipeline now.",
		}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "svc_ingress_request_duration_seconds", Help: "HTTP ingress request time, accepted requests only.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}),
	}
	for _, reason := range []string{"unauthorized", "rate_limited", "client_concurrency", "overloaded", "too_large", "body_timeout", "bad_request", "draining", "executor_unavailable"} {
		m.rejections.WithLabelValues(reason)
	}
	reg.MustRegister(m.requests, m.rejections, m.inFlight, m.duration)
	return m
}

// RegisterRecorderMetrics exports the flight recorder's counters.
func RegisterRecorderMetrics(reg prometheus.Registerer, rec *recorder.Recorder) {
	counter := func(name, help string, f func(recorder.Stats) uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return float64(f(rec.Stats())) })
	}
	deleted := func(reason string, f func(recorder.Stats) uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "svc_recorder_deleted_total",
			Help:        "Recorder files deleted automatically, by reason: age (history.max_age), budget (history.max_bytes), merged_retention (history.merged_retention_days).",
			ConstLabels: prometheus.Labels{"reason": reason}}, func() float64 { return float64(f(rec.Stats())) })
	}
	bytes := func(kind string, f func(recorder.HistoryUsage) int64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "svc_recorder_bytes",
			Help:        "Disk taken by recorder files, by kind: this worker's live file, the cluster's sealed files and archives (with their metadata), merge results.",
			ConstLabels: prometheus.Labels{"kind": kind}}, func() float64 { return float64(f(rec.History())) })
	}
	reg.MustRegister(
		counter("svc_recorder_dropped_total", "Recorder events and task rows not stored: write buffer full or write failed.",
			func(s recorder.Stats) uint64 { return s.EventsDropped + s.TasksDropped }),
		counter("svc_recorder_lost_rows_total", "Recorder rows lost to failed writes (full disk, I/O errors); part of svc_recorder_dropped_total.",
			func(s recorder.Stats) uint64 { return s.RowsLost }),
		counter("svc_recorder_written_total", "Recorder events and task rows stored.",
			func(s recorder.Stats) uint64 { return s.EventsWritten + s.TasksWritten }),
		counter("svc_recorder_subscriber_drops_total", "Live-stream items a /ws subscription missed: recorded faster than its queue holds between two batches.",
			func(s recorder.Stats) uint64 { return s.SubscriberDrops }),
		counter("svc_recorder_write_errors_total", "Failed recorder write batches.",
			func(s recorder.Stats) uint64 { return s.WriteErrors }),
		counter("svc_recorder_seals_total", "Live recorder files sealed into history.",
			func(s recorder.Stats) uint64 { return s.Seals }),
		counter("svc_recorder_archived_files_total", "Sealed files folded into archives by this worker.",
			func(s recorder.Stats) uint64 { return s.ArchivedFiles }),
		counter("svc_recorder_archive_inflations_total", "Archives decompressed (or begun to be) for traces.",
			func(s recorder.Stats) uint64 { return s.ArchiveInflations }),
		counter("svc_recorder_archives_refused_total", "Archives refused by traces (beyond their size cap, not a database, corrupt), each once while unchanged.",
			func(s recorder.Stats) uint64 { return s.ArchivesRefused }),
		counter("svc_recorder_tasks_sampled_total", "Successful task rows counted but not stored over history.sample_above_per_second.",
			func(s recorder.Stats) uint64 { return s.TasksSampled }),
		counter("svc_recorder_events_summarized_total", "Events of successful first attempts (lifecycle, annotations, sink deliveries) stored folded into their task row (history.task_detail = summary); part of svc_recorder_written_total.",
			func(s recorder.Stats) uint64 { return s.EventsSummarized }),
		deleted("age", func(s recorder.Stats) uint64 { return s.DeletedAge }),
		deleted("budget", func(s recorder.Stats) uint64 { return s.DeletedBudget }),
		deleted("merged_retention", func(s recorder.Stats) uint64 { return s.MergedRemoved }),
		bytes("live", func(h recorder.HistoryUsage) int64 { return h.LiveBytes }),
		bytes("sealed", func(h recorder.HistoryUsage) int64 { return h.SealedBytes }),
		bytes("archive", func(h recorder.HistoryUsage) int64 { return h.ArchiveBytes }),
		bytes("merged", func(h recorder.HistoryUsage) int64 { return h.MergedBytes }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "svc_recorder_queue_length", Help: "Items waiting in the recorder write buffer."},
			func() float64 { return float64(rec.Stats().Queued) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "svc_recorder_memory_only", Help: "1 while the recorder keeps history in memory only (no storage.dir, or it could not be written at startup)."},
			func() float64 {
				if rec.MemoryOnly() {
					return 1
				}
				return 0
			}),
	)
}
