package demo

import (
	"path/filepath"
	"time"

	"svc/worker/config"
)

// Ports of the demo's surfaces.
type Ports struct {
	UI, Ingress, Metrics int
}

// IngressToken is the demo ingress client's bearer token.
const IngressToken = "demo-token-0123456789"

// Config returns the demo worker's configuration: everything on loopback,
// the svc binary as the executor, storage under dir, and the Kafka source
// (with delivery), a sink and the DLQ on the cluster at brokers.
func Config(self, dir string, p Ports, brokers []string, delivery string) *config.Config {
	cfg := config.Default()
	cfg.Worker.Name = "demo"
	cfg.Worker.ShutdownTimeout = config.Duration(5 * time.Second)
	cfg.Metrics.Host, cfg.Metrics.Port = "127.0.0.1", p.Metrics
	cfg.UI.Host, cfg.UI.Port = "127.0.0.1", p.UI
	cfg.UI.ConsumePause.Enabled = true
	cfg.UI.RedriveEnabled = true
	cfg.Executor.BinaryPath = self
	cfg.Executor.Args = []string{"exec-demo"}
	cfg.Executor.Env = map[string]string{FixEnv: FixFile(dir)}
	cfg.Executor.Timeout = config.Duration(10 * time.Second)
	cfg.Handler.RetryBackoff = config.Duration(50 * time.Millisecond)
	cfg.Sources.HTTP.Enabled = true
	cfg.Sources.HTTP.Host, cfg.Sources.HTTP.Port = "127.0.0.1", p.Ingress
	cfg.Sources.HTTP.Clients = []config.HTTPClient{{Name: "demo", Token: IngressToken, RPM: 600}}
	cfg.Storage.Dir = dir
	cfg.Handler.LabelFields = []string{"customer"}
	cfg.Sources.Kafka.Enabled = true
	cfg.Sources.Kafka.Brokers = brokers
	cfg.Sources.Kafka.Topic = TopicIn
	cfg.Sources.Kafka.Group = "svc-demo"
	cfg.Sources.Kafka.StartupAlignEnabled = false
	cfg.Sources.Kafka.Delivery = delivery
	if delivery != config.DeliveryExactlyOnce {
		// Commits show in the UI within a second.
		cfg.Sources.Kafka.CommitInterval = config.Duration(time.Second)
	}
	cfg.Sinks.Kafka = []config.KafkaSink{{Name: "results", Topic: TopicOut}}
	cfg.DLQ.SendTimeout = config.Duration(10 * time.Second)
	cfg.Cache.Enabled = true
	cfg.Resolve()
	return &cfg
}

// FixFile is the file whose existence fixes the demo's FixCurrency orders.
func FixFile(dir string) string { return filepath.Join(dir, "fixed") }
