package httpd

import (
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
	for _, reason := range []string{"unauthorized", "rate_limited", "overloaded", "too_large", "bad_request", "draining"} {
		m.rejections.WithLabelValues(reason)
	}
	reg.MustRegister(m.requests, m.rejections, m.inFlight, m.duration)
	return m
}
