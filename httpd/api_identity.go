package httpd

import (
	"net/http"

	"svc/worker"
)

// ContractVersion is the operator-interface contract this worker serves.
const ContractVersion = "v1.14"

// Identity is GET /api/v1/identity: who this worker is and what its UI
// may show. Release is the UI bundle tag served ("" while none is loaded);
// Version is the binary's.
type Identity struct {
	Worker          string          `json:"worker"`
	Cluster         string          `json:"cluster"`
	Release         string          `json:"release"`
	Version         string          `json:"version"`
	Contract        string          `json:"contract"`
	StartedAtMS     int64           `json:"started_at_ms"`
	URL             string          `json:"url"`
	CustomRenderers bool            `json:"custom_renderers"`
	Features        map[string]bool `json:"features"`
	UILinks
}

func (s *UIServer) identity(w http.ResponseWriter, r *http.Request) {
	c := s.cfg
	writeJSON(w, http.StatusOK, Identity{
		Worker: c.Worker.Name, Cluster: c.Worker.Cluster, Release: s.bundleTag(), Version: worker.Version, Contract: ContractVersion,
		StartedAtMS: s.started.UnixMilli(), URL: s.URL(), CustomRenderers: c.UI.CustomRenderersPath != "",
		Features: map[string]bool{
			"kafka_source":   c.Sources.Kafka.Enabled,
			"http_source":    c.Sources.HTTP.Enabled,
			"probe":          c.UI.ProbeEnabled,
			"merge":          c.UI.MergeEnabled,
			"kafka_read":     c.UI.KafkaReadEnabled,
			"redrive":        c.UI.RedriveEnabled && c.Sources.Kafka.Enabled,
			"consume_pause":  c.UI.ConsumePause.Enabled,
			"auth":           c.UI.AuthToken != "",
			"recorder":       c.UI.Enabled,
			"persistent":     c.Storage.Dir != "",
			"cache":          c.Cache.Enabled,
			"metrics":        c.Metrics.Enabled,
			"prometheus":     c.UI.PrometheusURL != "",
			"ui_release":     c.UI.Release.Enabled,
			"runtime_health": c.RuntimeHealth.Enabled,
		},
		UILinks: s.uiLinks(),
	})
}

// config answers the effective config with secrets masked.
func (s *UIServer) config(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.cfg.Masked())
}
