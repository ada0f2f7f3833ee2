package httpd

import "net/http"

// routes lists every route of the UI server.
func (s *UIServer) routes() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", s.healthz)
	mux.HandleFunc("GET /readyz", s.readyz)

	mux.HandleFunc("GET /api/v1/identity", s.identity)
	mux.HandleFunc("GET /api/v1/config", s.config)
	mux.HandleFunc("GET /api/v1/debug/metrics", s.debugMetrics)
	mux.HandleFunc("GET /api/v1/pages", s.pages)
	mux.HandleFunc("GET /api/v1/ui/renderers.js", s.renderers)

	ui := s.cfg.UI
	mux.HandleFunc("GET /api/v1/debug/consume-pause", s.consumePauseState)
	mux.HandleFunc("POST /api/v1/debug/consume-pause", featureGate(ui.ConsumePause.Enabled, "ui.consume_pause.enabled", s.consumePause))
	mux.HandleFunc("POST /api/v1/debug/consume-resume", featureGate(ui.ConsumePause.Enabled, "ui.consume_pause.enabled", s.consumeResume))
	mux.HandleFunc("POST /api/v1/debug/probe", featureGate(ui.ProbeEnabled, "ui.probe_enabled", s.probe))

	kafka := func(h http.HandlerFunc) http.HandlerFunc {
		return featureGate(ui.KafkaReadEnabled, "ui.kafka_read_enabled", h)
	}
	mux.HandleFunc("GET /api/v1/debug/kafka/topics", kafka(s.kafkaTopics))
	mux.HandleFunc("GET /api/v1/debug/kafka/group", kafka(s.kafkaGroup))
	mux.HandleFunc("GET /api/v1/debug/kafka/{alias}/message", kafka(s.kafkaMessage))
	mux.HandleFunc("GET /api/v1/debug/kafka/{alias}/messages", kafka(s.kafkaMessages))

	mux.HandleFunc("GET /api/v1/events", s.events)
	mux.HandleFunc("GET /api/v1/live/task-results", s.taskResults)
	mux.HandleFunc("GET /api/v1/dashboard/counts", s.counts)
	mux.HandleFunc("GET /api/v1/debug/databases", s.withCORS(s.databases))
	mux.HandleFunc("GET /api/v1/debug/trace", s.withCORS(s.trace))
	mux.HandleFunc("GET /api/v1/debug/trace-by-label", s.withCORS(s.traceByLabel))
	mux.HandleFunc("OPTIONS /api/v1/debug/databases", s.corsPreflight)
	mux.HandleFunc("OPTIONS /api/v1/debug/trace", s.corsPreflight)
	mux.HandleFunc("OPTIONS /api/v1/debug/trace-by-label", s.corsPreflight)
	mux.HandleFunc("GET /api/v1/debug/download", s.download)
	mux.HandleFunc("GET /api/v1/debug/download-live", s.downloadLive)
	mux.HandleFunc("POST /api/v1/debug/merge", featureGate(ui.MergeEnabled, "ui.merge_enabled", s.merge))
	mux.Handle("GET /ws", s.ws)

	mux.HandleFunc("/api/", s.apiNotFound)
	mux.HandleFunc("/", s.page)
	return mux
}
