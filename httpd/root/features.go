package root

// features are the switches GET /api/v1/identity advertises, each derived
// from a part that was built (not from the config that asked for it), so
// the UI never offers what this process cannot do.
func (w *Worker) features() map[string]bool {
	c := w.Config
	rec := w.Recorder != nil
	return map[string]bool{
		"kafka_source":   w.Kafka != nil,
		"http_source":    w.Ingress != nil,
		"probe":          w.UI != nil && c.UI.ProbeEnabled,
		"merge":          rec && c.UI.MergeEnabled,
		"kafka_read":     w.Reader != nil && c.UI.KafkaReadEnabled,
		"redrive":        w.Redrive != nil,
		"consume_pause":  w.Kafka != nil && c.UI.ConsumePause.Enabled,
		"auth":           c.UI.AuthToken != "",
		"recorder":       rec,
		"persistent":     rec && !w.Recorder.MemoryOnly(),
		"cache":          w.Cache != nil,
		"cache_exchange": w.Exchange != nil,
		"fleet":          w.Fleet != nil,
		"metrics":        w.Metrics != nil,
		"prometheus":     c.UI.PrometheusURL != "",
		"ui_release":     w.Site != nil,
		"runtime_health": w.Monitor != nil,
		"throughput":     w.Throughput != nil && w.Throughput.Enabled(),
	}
}
