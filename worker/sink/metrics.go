package sink

import "github.com/prometheus/client_golang/prometheus"

// sinkMetrics are the series of every sink, labelled by sink name.
type sinkMetrics struct {
	state       *prometheus.GaugeVec
	transitions *prometheus.CounterVec
	delivered   *prometheus.CounterVec
	failures    *prometheus.CounterVec
	tooLarge    *prometheus.CounterVec
	// refusedRetries: records produced again alone after a broker
	// refused their batch as too large (kafkaSink.judge).
	refusedRetries *prometheus.CounterVec
	dlq            *prometheus.CounterVec
	truncated      prometheus.Counter
	dropped        prometheus.Counter
}

func newSinkMetrics(reg prometheus.Registerer) *sinkMetrics {
	m := &sinkMetrics{
		state: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "svc_sink_breaker_state", Help: "Circuit breaker state per sink: 0 closed, 1 open, 2 half-open.",
		}, []string{"sink"}),
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "svc_sink_breaker_transitions_total", Help: "Circuit breaker transitions per sink, by target state.",
		}, []string{"sink", "to"}),
		delivered: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "svc_sink_delivered_total", Help: "Result records acknowledged by each sink.",
		}, []string{"sink"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "svc_sink_delivery_failures_total", Help: "Failed or unacknowledged delivery attempts per sink (each is retried).",
		}, []string{"sink"}),
		tooLarge: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "svc_sink_records_too_large_total", Help: "Result records larger than the sink topic's max.message.bytes; their messages went to the DLQ instead.",
		}, []string{"sink"}),
		refusedRetries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "svc_sink_refused_retries_total", Help: "Result records a broker refused as too large in a batch, within the topic's limit as looked up again, produced again alone (the lookup did not lower the limit, or the record was refused again).",
		}, []string{"sink"}),
		dlq: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "svc_dlq_records_total", Help: "DLQ outcomes: sent, failed (stall or drop follows), by outcome.",
		}, []string{"outcome"}),
		truncated: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "svc_dlq_records_truncated_total", Help: "DLQ records sent with their value cut to fit the DLQ topic's max.message.bytes (header svc-dlq-truncated).",
		}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "svc_dlq_unconfigured_drops_total", Help: "Failed messages dropped because no DLQ is configured (no Kafka source and no dlq.topic).",
		}),
	}
	reg.MustRegister(m.state, m.transitions, m.delivered, m.failures, m.tooLarge, m.refusedRetries, m.dlq, m.truncated, m.dropped)
	for _, outcome := range []string{"sent", "failed"} {
		m.dlq.WithLabelValues(outcome)
	}
	return m
}
