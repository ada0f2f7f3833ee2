package httpd

import (
	"math"
	"net/http"
	"slices"
	"strconv"

	dto "github.com/prometheus/client_model/go"
)

// MetricFamily is one family of GET /api/v1/debug/metrics.
type MetricFamily struct {
	Name    string         `json:"name"`
	Type    string         `json:"type"`
	Help    string         `json:"help"`
	Samples []MetricSample `json:"samples"`
}

// MetricSample is one labelled value. Histograms and summaries give their
// observation count as Value, plus Sum (and Buckets for histograms), so the
// values of any family can be summed by name.
type MetricSample struct {
	Labels  map[string]string  `json:"labels"`
	Value   float64            `json:"value"`
	Sum     *float64           `json:"sum,omitempty"`
	Buckets map[string]float64 `json:"buckets,omitempty"`
}

// maxMetricNames bounds the name filter of GET /api/v1/debug/metrics.
const maxMetricNames = 100

func (s *UIServer) debugMetrics(w http.ResponseWriter, r *http.Request) {
	names := r.URL.Query()["name"]
	if len(names) > maxMetricNames {
		writeError(w, http.StatusBadRequest, "bad_request", "at most "+strconv.Itoa(maxMetricNames)+" name parameters")
		return
	}
	fams, err := s.gather.Gather()
	if err != nil && len(fams) == 0 {
		writeError(w, http.StatusInternalServerError, "metrics_unavailable", err.Error())
		return
	}
	out := make([]MetricFamily, 0, len(fams))
	aliases := s.topicAliases()
	for _, f := range fams {
		if len(names) > 0 && !slices.Contains(names, f.GetName()) {
			continue
		}
		mf := MetricFamily{Name: f.GetName(), Type: typeName(f.GetType()), Help: f.GetHelp(), Samples: make([]MetricSample, 0, len(f.Metric))}
		for _, m := range f.Metric {
			sm := sampleOf(f.GetType(), m)
			if t, ok := sm.Labels["topic"]; ok {
				sm.Labels["topic"] = aliases[t]
			}
			mf.Samples = append(mf.Samples, sm)
		}
		out = append(out, mf)
	}
	writeJSON(w, http.StatusOK, map[string]any{"families": out})
}

// topicAliases maps the worker's topics to their aliases: API answers
// name topics by alias only (the exporter's `topic` labels are raw).
func (s *UIServer) topicAliases() map[string]string {
	m := map[string]string{}
	for _, k := range s.cfg.Sinks.Kafka {
		m[k.Topic] = k.Name
	}
	if t := s.cfg.DLQTopic(); t != "" {
		m[t] = "dlq"
	}
	if s.cfg.Sources.Kafka.Enabled {
		m[s.cfg.Sources.Kafka.Topic] = "source"
	}
	return m
}

func typeName(t dto.MetricType) string {
	switch t {
	case dto.MetricType_COUNTER:
		return "counter"
	case dto.MetricType_GAUGE:
		return "gauge"
	case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
		return "histogram"
	case dto.MetricType_SUMMARY:
		return "summary"
	}
	return "untyped"
}

func sampleOf(t dto.MetricType, m *dto.Metric) MetricSample {
	s := MetricSample{Labels: map[string]string{}}
	for _, l := range m.Label {
		s.Labels[l.GetName()] = l.GetValue()
	}
	switch t {
	case dto.MetricType_COUNTER:
		s.Value = m.GetCounter().GetValue()
	case dto.MetricType_GAUGE:
		s.Value = m.GetGauge().GetValue()
	case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
		h := m.GetHistogram()
		s.Value = float64(h.GetSampleCount())
		s.Sum = new(h.GetSampleSum())
		s.Buckets = map[string]float64{}
		for _, b := range h.Bucket {
			s.Buckets[formatBound(b.GetUpperBound())] = float64(b.GetCumulativeCount())
		}
	case dto.MetricType_SUMMARY:
		sm := m.GetSummary()
		s.Value = float64(sm.GetSampleCount())
		s.Sum = new(sm.GetSampleSum())
	default:
		s.Value = m.GetUntyped().GetValue()
	}
	if math.IsNaN(s.Value) || math.IsInf(s.Value, 0) {
		s.Value = 0
	}
	return s
}

func formatBound(f float64) string {
	if math.IsInf(f, 1) {
		return "+Inf"
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

func (s *UIServer) debugRuntime(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.runtime.Snapshot())
}

func (s *UIServer) debugThroughput(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.costs.Snapshot())
}
