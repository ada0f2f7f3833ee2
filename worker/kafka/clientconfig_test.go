package kafka

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"svc/worker/config"
	"svc/worker/workertest"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
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
}

// TestKafkaFetchLongPoll: the consumer's fetch requests ask the broker to
// wait at most 100 ms for records, not Kafka's usual 500 (nor the client
// library's 5 s): while a fetch waits on caught-up partitions no other
// fetch goes to that broker, so a partition resumed after backpressure
// waits that long for its records. fetch.max.wait.ms still sets it.
func TestKafkaFetchLongPoll(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, set string
		want      int32
	}{{"default", "", 100}, {"client_config", "1500", 1500}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := ktCluster(t, 1)
			var mu sync.Mutex
			waits := map[int32]int{}
			c.ControlKey(int16(kmsg.Fetch), func(kr kmsg.Request) (kmsg.Response, error, bool) {
				c.KeepControl()
				mu.Lock()
				waits[kr.(*kmsg.FetchRequest).MaxWaitMillis]++
				mu.Unlock()
				return nil, nil, false
			})
			cfg := ktConfig(t, c.ListenAddrs(), workertest.EchoScript(t))
			if tc.set != "" {
				cfg.Sources.Kafka.ClientConfig["fetch.max.wait.ms"] = tc.set
			}
			w := ktStart(t, cfg)
			w.WaitJoined()
			// The consumer fetches the empty topic again and again: every
			// request it sends carries the wait.
			deadline := time.Now().Add(20 * time.Second)
			for {
				mu.Lock()
				n, all := waits[tc.want], 0
				for _, k := range waits {
					all += k
				}
				seen := fmt.Sprint(waits)
				mu.Unlock()
				if n != all {
					t.Fatalf("fetch requests by their max wait (ms): %s, want every one at %d", seen, tc.want)
				}
				if n >= 3 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%d fetch requests in 20 s, want 3", n)
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
}
