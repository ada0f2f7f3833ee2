package httpd

import (
	"net/http"
	"strings"
)

// routes lists every route of the UI server.
func (s *UIServer) routes() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", s.healthz)
	mux.HandleFunc("GET /readyz", s.readyz)

	mux.HandleFunc("GET /api/v1/identity", s.identity)
	mux.HandleFunc("GET /api/v1/config", s.config)
	mux.HandleFunc("GET /api/v1/debug/metrics", s.debugMetrics)
	mux.HandleFunc("GET /api/v1/debug/runtime", s.debugRuntime)
	mux.HandleFunc("GET /api/v1/debug/throughput", s.debugThroughput)
	mux.HandleFunc("GET /api/v1/pages", s.pages)
	mux.HandleFunc("GET /api/v1/ui/renderers.js", s.renderers)

	mux.HandleFunc("GET /api/v1/debug/consume-pause", s.consumePauseState)
	mux.HandleFunc("POST /api/v1/debug/consume-pause", s.consumePause)
	mux.HandleFunc("POST /api/v1/debug/consume-resume", s.consumeResume)
	mux.HandleFunc("POST /api/v1/debug/probe", s.probe)

	mux.HandleFunc("POST /api/v1/debug/dlq/redrive", s.streams.guard(s.dlqRedrive))
	mux.HandleFunc("GET /api/v1/debug/dlq/records", s.streams.guard(s.dlqRecords))
	mux.HandleFunc("GET /api/v1/debug/kafka/topics", s.kafkaTopics)
	mux.HandleFunc("GET /api/v1/debug/kafka/group", s.kafkaGroup)
	mux.HandleFunc("GET /api/v1/debug/kafka/head-of-line", s.kafkaHeadOfLine)
	mux.HandleFunc("GET /api/v1/debug/kafka/{alias}/message", s.kafkaMessage)
	mux.HandleFunc("GET /api/v1/debug/kafka/{alias}/messages", s.streams.guard(s.kafkaMessages))

	mux.HandleFunc("GET /api/v1/events", s.events)
	mux.HandleFunc("GET /api/v1/live/task-results", s.taskResults)
	mux.HandleFunc("GET /api/v1/dashboard/counts", s.counts)
	mux.HandleFunc("GET /api/v1/dashboard/trends", s.dashboardTrends)
	mux.HandleFunc("GET /api/v1/debug/databases", s.withCORS(s.databases))
	mux.HandleFunc("GET /api/v1/debug/trace", s.withCORS(s.trace))
	mux.HandleFunc("GET /api/v1/debug/trace-by-label", s.withCORS(s.traceByLabel))
	mux.HandleFunc("OPTIONS /api/v1/debug/databases", s.corsPreflight)
	mux.HandleFunc("OPTIONS /api/v1/debug/trace", s.corsPreflight)
	mux.HandleFunc("OPTIONS /api/v1/debug/trace-by-label", s.corsPreflight)
	mux.HandleFunc("GET /api/v1/debug/download", s.streams.guard(s.download))
	mux.HandleFunc("GET /api/v1/debug/download-live", s.streams.guard(s.downloadLive))
	mux.HandleFunc("POST /api/v1/debug/merge", s.merge)
	mux.Handle("GET /ws", s.ws)

	mux.HandleFunc("GET /api/v1/fleet/workers", s.fleetWorkers)
	mux.HandleFunc("GET /api/v1/running", s.running)
	mux.HandleFunc("GET /api/v1/debug/cache", s.debugCache)
	mux.HandleFunc("GET /api/v1/peer/cache/changes", s.peerCacheChanges)

	mux.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) { s.apiNotFound(mux, w, r) })
	mux.HandleFunc("/", s.page)
	return mux
}

// killSwitch is a feature whose routes answer 403 naming its config key
// while it is off, whatever the token.
type killSwitch struct {
	key     string
	enabled bool
	match   func(r *http.Request) bool
}

// killSwitches lists the switched routes: probe, merge, Kafka read (the
// DLQ triage page included), redrive and the consume pause's POSTs (its
// GET always answers).
func (s *UIServer) killSwitches() []killSwitch {
	ui := s.cfg.UI
	post := func(path string) func(*http.Request) bool {
		return func(r *http.Request) bool { return r.Method == http.MethodPost && r.URL.Path == path }
	}
	return []killSwitch{
		{"ui.probe_enabled", ui.ProbeEnabled, post("/api/v1/debug/probe")},
		{"ui.merge_enabled", ui.MergeEnabled, post("/api/v1/debug/merge")},
		{"ui.kafka_read_enabled", ui.KafkaReadEnabled, func(r *http.Request) bool {
			return strings.HasPrefix(r.URL.Path, "/api/v1/debug/kafka/") || r.URL.Path == "/api/v1/debug/dlq/records"
		}},
		{"ui.redrive_enabled", ui.RedriveEnabled, post("/api/v1/debug/dlq/redrive")},
		{"ui.consume_pause.enabled", ui.ConsumePause.Enabled, func(r *http.Request) bool {
			return post("/api/v1/debug/consume-pause")(r) || post("/api/v1/debug/consume-resume")(r)
		}},
	}
}

// guardKillSwitches answers 403 for a route whose feature is off. It runs
// before the token gate: a switched-off feature is off for everyone.
func guardKillSwitches(switches []killSwitch, next http.Handler) http.Handler {
	var off []killSwitch
	for _, k := range switches {
		if !k.enabled {
			off = append(off, k)
		}
	}
	if len(off) == 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, k := range off {
			if k.match(r) {
				writeError(w, http.StatusForbidden, "feature_disabled", k.key+" is false")
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}
