package worker

import (
	"testing"
	"time"

	"svc/worker/config"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestKafkaClientConfigWins: the documented client_config keys of a
// connection block (client.id, linger.ms) take effect on the consumer,
// the sinks and the DLQ; without them a sink sends at once (no linger:
// each delivery waits for its acknowledgement, so lingering only adds
// latency and caps throughput at max_in_flight per linger).
func TestKafkaClientConfigWins(t *testing.T) {
	c := ktCluster(t, 1)
	addrs := c.ListenAddrs()
	cfg := ktConfig(t, addrs, ktEchoScript(t))
	cfg.Sources.Kafka.ClientConfig["client.id"] = "ops-consumer"
	tuned := cfg.Sinks.Kafka[0]
	tuned.Name, tuned.Brokers = "tuned", addrs
	tuned.ClientConfig = map[string]string{"client.id": "ops-sink", "linger.ms": "3"}
	plain := cfg.Sinks.Kafka[0]
	plain.Name, plain.Brokers = "plain", addrs
	cfg.Sinks.Kafka = []config.KafkaSink{tuned, plain}
	cfg.DLQ.Brokers = addrs
	cfg.DLQ.ClientConfig = map[string]string{"client.id": "ops-dlq"}
	w := ktStart(t, cfg)
	w.WaitJoined()

	for _, tc := range []struct {
		name   string
		cl     *kgo.Client
		id     string
		linger time.Duration
	}{
		{"consumer", w.client(), "ops-consumer", -1},
		{"sink with client_config", w.App.sinkSet.byName["tuned"].cl, "ops-sink", 3 * time.Millisecond},
		{"sink without client_config", w.App.sinkSet.byName["plain"].cl, "svc-sink", 0},
		{"dlq", w.App.sinkSet.dlq.cl, "ops-dlq", 0},
	} {
		if got := tc.cl.OptValue(kgo.ClientID); got != tc.id {
			t.Errorf("%s: client id = %v, want %s", tc.name, got, tc.id)
		}
		if tc.linger >= 0 {
			if got := tc.cl.OptValue(kgo.ProducerLinger); got != tc.linger {
				t.Errorf("%s: linger = %v, want %v", tc.name, got, tc.linger)
			}
		}
	}
}
