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
	// TaskSamplingAbove is history.sample_above_per_second while the
	// recorder stores task rows (0: every row is stored).
	TaskSamplingAbove int `json:"task_sampling_above_per_second"`
	// KafkaDelivery is sources.kafka.delivery ("at_least_once",
	// "exactly_once"); "" without the Kafka source.
	KafkaDelivery string `json:"kafka_delivery"`
	UILinks
}

// SetFeatures sets the switches identity advertises. Call before Run.
func (s *UIServer) SetFeatures(f map[string]bool) { s.features = f }

func (s *UIServer) identity(w http.ResponseWriter, r *http.Request) {
	c := s.cfg
	writeJSON(w, http.StatusOK, Identity{
		Worker: c.Worker.Name, Cluster: c.Worker.Cluster, Release: s.bundleTag(), Version: worker.Version, Contract: ContractVersion,
		StartedAtMS: s.started.UnixMilli(), URL: s.URL(), CustomRenderers: c.UI.CustomRenderersPath != "",
		Features: s.features, TaskSamplingAbove: s.taskSampling(),
		KafkaDelivery: c.KafkaDelivery(),
		UILinks:       s.uiLinks(),
	})
}

// config answers the effective config with secrets masked.
func (s *UIServer) config(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.cfg.Masked())
}

// taskSampling is history.sample_above_per_second when a recorder samples
// task rows into files, else 0.
func (s *UIServer) taskSampling() int {
	if s.rec == nil || s.rec.MemoryOnly() || s.cfg.History.TaskDetail == "full" {
		return 0
	}
	return s.cfg.History.SampleAbovePerSecond
}
