package kafka

import (
	"testing"
	"time"

	"svc/worker/config"
	"svc/worker/workertest"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestKafkaClientConfigWins: client_config's client.id takes effect on the
// running consumer (the sinks and the DLQ are checked in worker/sink).
func TestKafkaClientConfigWins(t *testing.T) {
	t.Parallel()
	c := ktCluster(t, 1)
	addrs := c.ListenAddrs()
	cfg := ktConfig(t, addrs, workertest.EchoScript(t))
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
	// The consumer long-polls 500 ms, not the client library's 5 s: a
	// partition resumed after backpressure waits for the next fetch.
	if got := w.client().OptValue(kgo.FetchMaxWait); got != 500*time.Millisecond {
		t.Errorf("consumer fetch wait = %v, want the 500ms default", got)
	}
	cfg2 := ktConfig(t, addrs, workertest.EchoScript(t))
	cfg2.Sources.Kafka.ClientConfig["fetch.max.wait.ms"] = "1500"
	w2 := ktStart(t, cfg2)
	w2.WaitJoined()
	if got := w2.client().OptValue(kgo.FetchMaxWait); got != 1500*time.Millisecond {
		t.Errorf("consumer fetch wait with fetch.max.wait.ms = 1500: %v, want 1.5s", got)
	}
}
