package cache

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Write sources (label values of svc_cache_writes_total).
const (
	sourceLocal = "local" // this worker: executors and Go handlers
	sourcePeer  = "peer"  // rows pulled from peers
)

// metrics are the cache's series. Labels take bounded values only.
type metrics struct {
	writes *prometheus.CounterVec
	reads  *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer, s *Store) *metrics {
	m := &metrics{
		writes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "svc_cache_writes_total",
			Help: "Handler-cache writes by source (local, peer) and result (stored, superseded, refused_key, refused_value, refused_scope, refused_full, error).",
		}, []string{"source", "result"}),
		reads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "svc_cache_reads_total",
			Help: "Reads of handler.cache_keys for executor runs, by result (hit, miss, over_budget, error).",
		}, []string{"result"}),
	}
	reg.MustRegister(m.writes, m.reads,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "svc_cache_rows", Help: "Rows in the handler cache (bounded by cache.max_rows).",
		}, func() float64 { return float64(s.rows.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "svc_cache_bytes", Help: "Key and value bytes in the handler cache (bounded by cache.max_bytes).",
		}, func() float64 { return float64(s.bytes.Load()) }),
	)
	return m
}

// count records one write's outcome.
func (m *metrics) count(source string, err error) {
	m.writes.WithLabelValues(source, writeResult(err)).Inc()
}

// writeResult is the result label (and annotation reason) of a write error.
func writeResult(err error) string {
	switch {
	case err == nil:
		return "stored"
	case errors.Is(err, ErrBadKey):
		return "refused_key"
	case errors.Is(err, ErrValueTooLarge):
		return "refused_value"
	case errors.Is(err, ErrBadScope):
		return "refused_scope"
	case errors.Is(err, ErrFull):
		return "refused_full"
	}
	return "error"
}
