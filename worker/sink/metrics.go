package sink

import "github.com/prometheus/client_golang/prometheus"

// sinkMetrics are the series of every sink, labelled by sink name, and
// the DLQ's.
type sinkMetrics struct {
	state          *prometheus.GaugeVec
	transitions    *prometheus.CounterVec
	delivered      *prometheus.CounterVec
	failures       *prometheus.CounterVec
	tooLarge       *prometheus.CounterVec
	refusedRetries *prometheus.CounterVec // kafkaSink.judge
	dlq            *prometheus.CounterVec
	truncated      prometheus.Counter
	dropped        prometheus.Counter
}

func newSinkMetrics(reg prometheus.Registerer) *sinkMetrics {
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
		reg.MustRegister(c)
		return c
	}
	m := &sinkMetrics{
		state: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "svc_sink_breaker_state", Help: "Circuit breaker state per sink: 0 closed, 1 open, 2 half-open.",
		}, []string{"sink"}),
		transitions: counter("svc_sink_breaker_transitions_total", "Circuit breaker transitions per sink, by target state.", "sink", "to"),
		delivered:   counter("svc_sink_delivered_total", "Result records acknowledged by each sink.", "sink"),
		failures:    counter("svc_sink_delivery_failures_total", "Failed or unacknowledged delivery attempts per sink (each is retried).", "sink"),
		tooLarge: counter("svc_sink_records_too_large_total",
			"Result records larger than the sink topic's max.message.bytes; their messages went to the DLQ instead.", "sink"),
		refusedRetries: counter("svc_sink_refused_retries_total",
			"Result records a broker refused as too large in a batch, within the topic's limit as looked up again, produced again alone (the lookup did not lower the limit, or the record was refused again).", "sink"),
		dlq: counter("svc_dlq_records_total", "DLQ outcomes: sent, failed (stall or drop follows), by outcome.", "outcome"),
		truncated: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "svc_dlq_records_truncated_total", Help: "DLQ records sent with their value cut to fit the DLQ topic's max.message.bytes (header svc-dlq-truncated).",
		}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "svc_dlq_unconfigured_drops_total", Help: "Failed messages dropped because no DLQ is configured (no Kafka source and no dlq.topic).",
		}),
	}
	reg.MustRegister(m.state, m.truncated, m.dropped)
	for _, outcome := range []string{"sent", "failed"} {
		m.dlq.WithLabelValues(outcome)
	}
	return m
}

// addSink exports every series of sink name from the start.
func (m *sinkMetrics) addSink(name string) {
	m.state.WithLabelValues(name).Set(float64(Closed))
	for _, to := range []State{Closed, Open, HalfOpen} {
		m.transitions.WithLabelValues(name, to.String())
	}
	for _, c := range []*prometheus.CounterVec{m.delivered, m.failures, m.tooLarge, m.refusedRetries} {
		c.WithLabelValues(name)
	}
}
