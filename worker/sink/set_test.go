package sink

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"svc/worker/config"
	"svc/worker/model"
	"svc/worker/workertest"
	"svc/worker/workertest/wait"
)

// TestClientConfigWins: the documented client_config keys of a connection
// block (client.id, linger.ms) take effect on the sinks and the DLQ, also
// on a sink that inherits the consumer's brokers (its own keys override
// the consumer's); without them a producer lingers 5 ms (Kafka 4's
// default) when the Kafka source is on, so results go in batches, not
// three records a request, and not at all on an HTTP-only worker. The
// compression key picks the codec, snappy by default.
func TestClientConfigWins(t *testing.T) {
	t.Parallel()
	cfg := config.Default()
	cfg.Executor.BinaryPath = "/bin/cat"
	cfg.Sources.Kafka.Enabled = true
	cfg.Sources.Kafka.Brokers = []string{"127.0.0.1:1"}
	cfg.Sources.Kafka.Topic, cfg.Sources.Kafka.Group = "in", "g"
	cfg.Sources.Kafka.ClientConfig = map[string]string{"linger.ms": "7", "client.id": "ops-consumer"}
	own := []string{"127.0.0.1:2"} // own brokers: the sink's own client_config applies
	cfg.Sinks.Kafka = []config.KafkaSink{
		{Name: "tuned", Topic: "out", Brokers: own, ClientConfig: map[string]string{"client.id": "ops-sink", "linger.ms": "3"}, Compression: "zstd"},
		{Name: "plain", Topic: "out", Brokers: own},
		{Name: "inherits", Topic: "out", ClientConfig: map[string]string{"linger.ms": "2"}},
		{Name: "inherits-plain", Topic: "out"},
	}
	cfg.DLQ.Compression = "none"
	cfg.DLQ.Brokers = own
	cfg.DLQ.ClientConfig = map[string]string{"client.id": "ops-dlq"}
	ss := newTestSet(t, &cfg)
	defer ss.Close()
	for _, tc := range []struct {
		name   string
		cl     *kgo.Client
		id     string
		linger time.Duration
		codec  []kgo.CompressionCodec
	}{
		{"sink with client_config", ss.byName["tuned"].cl.client(), "ops-sink", 3 * time.Millisecond, []kgo.CompressionCodec{kgo.ZstdCompression(), kgo.NoCompression()}},
		{"sink without client_config", ss.byName["plain"].cl.client(), "svc-sink", 5 * time.Millisecond, []kgo.CompressionCodec{kgo.SnappyCompression(), kgo.NoCompression()}},
		{"sink inheriting the consumer's connection, own linger.ms", ss.byName["inherits"].cl.client(), "ops-consumer", 2 * time.Millisecond, []kgo.CompressionCodec{kgo.SnappyCompression(), kgo.NoCompression()}},
		{"sink inheriting the consumer's connection", ss.byName["inherits-plain"].cl.client(), "ops-consumer", 7 * time.Millisecond, []kgo.CompressionCodec{kgo.SnappyCompression(), kgo.NoCompression()}},
		{"dlq", ss.dlq.cl.client(), "ops-dlq", 5 * time.Millisecond, []kgo.CompressionCodec{kgo.NoCompression()}},
	} {
		if got := tc.cl.OptValue(kgo.ClientID); got != tc.id {
			t.Errorf("%s: client id = %v, want %s", tc.name, got, tc.id)
		}
		if got := tc.cl.OptValue(kgo.ProducerLinger); got != tc.linger {
			t.Errorf("%s: linger = %v, want %v", tc.name, got, tc.linger)
		}
		if got := tc.cl.OptValue(kgo.ProducerBatchCompression); !reflect.DeepEqual(got, tc.codec) {
			t.Errorf("%s: compression = %v, want %v", tc.name, got, tc.codec)
		}
	}

	// An HTTP-only worker's sinks do not linger: each request waits for
	// its own delivery, and a linger would be added to every response.
	hc := config.Default()
	hc.Executor.BinaryPath = "/bin/cat"
	hc.Sources.HTTP.Enabled, hc.Sources.HTTP.SinksEnabled, hc.Sources.HTTP.Host = true, true, "127.0.0.1"
	hc.Sinks.Kafka = []config.KafkaSink{
		{Name: "plain", Topic: "out", Brokers: own},
		{Name: "tuned", Topic: "out", Brokers: own, ClientConfig: map[string]string{"linger.ms": "2"}},
	}
	hs := newTestSet(t, &hc)
	defer hs.Close()
	if got := hs.byName["plain"].cl.client().OptValue(kgo.ProducerLinger); got != time.Duration(0) {
		t.Errorf("HTTP-only worker's sink: linger = %v, want 0", got)
	}
	if got := hs.byName["tuned"].cl.client().OptValue(kgo.ProducerLinger); got != 2*time.Millisecond {
		t.Errorf("HTTP-only worker's sink with linger.ms 2: linger = %v, want 2ms", got)
	}
}

// TestRecordHeaders: a DLQ record names the failed task (svc-task-id), so a
// record found with kcat leads to its trace; a sink record carries the
// input's own headers only with forward_headers, never its svc-* ones.
func TestRecordHeaders(t *testing.T) {
	t.Parallel()
	msg := &model.Message{Source: model.SourceKafka, Partition: 3, Offset: 9, Key: []byte("k"), Value: []byte("v"),
		Headers: []model.Header{{Key: "trace", Value: []byte("abc")}, {Key: "svc-dlq-reason", Value: []byte("old")}}}
	res := &model.TaskResult{Task: &model.Task{ID: "t-7", Msg: msg}, Status: model.StatusFailed, Output: []byte("out")}
	headers := func(r *kgo.Record) map[string]string {
		m := map[string]string{}
		for _, h := range r.Headers {
			m[h.Key] = string(h.Value)
		}
		return m
	}
	d := &DLQ{topic: "in_dlq", worker: "w"}
	if h := headers(d.record(res)); h[HeaderTaskID] != "t-7" || h["trace"] != "abc" || h[HeaderDLQSourceOffset] != "9" {
		t.Errorf("DLQ record headers = %v, want svc-task-id t-7 with the original headers", h)
	}
	if h := headers(resultRecord("out", "w", false, res)); h["trace"] != "" || h[HeaderTaskID] != "t-7" {
		t.Errorf("sink record without forward_headers = %v, want no input headers", h)
	}
	h := headers(resultRecord("out", "w", true, res))
	if h["trace"] != "abc" || h["svc-dlq-reason"] != "" || h[HeaderTaskID] != "t-7" {
		t.Errorf("sink record with forward_headers = %v, want the input's trace header and none of its svc-* ones", h)
	}
	// Every svc- header and label of a Kafka result, each value its own
	// (they share one buffer).
	ok := &model.TaskResult{Task: &model.Task{ID: "task-42", Msg: msg}, Status: model.StatusOK, Output: []byte("o"),
		Labels: map[string]string{"tenant": "acme", "region": "eu-west"}}
	msg.Source = model.SourceKafka
	rec := resultRecord("out", "worker-a", false, ok)
	want := map[string]string{HeaderTaskID: "task-42", HeaderWorker: "worker-a", HeaderSource: "kafka",
		HeaderSourcePartition: "3", HeaderSourceOffset: "9", "svc-label-tenant": "acme", "svc-label-region": "eu-west"}
	if got := headers(rec); !reflect.DeepEqual(got, want) || len(rec.Headers) != len(want) || string(rec.Key) != "k" || string(rec.Value) != "o" {
		t.Errorf("Kafka result record: key %q value %q headers %v, want key k, value o, headers %v", rec.Key, rec.Value, got, want)
	}
	for i := range rec.Headers { // appending to one value must not write into the next
		if v := rec.Headers[i].Value; cap(v) != len(v) {
			t.Errorf("header %s: cap %d > len %d", rec.Headers[i].Key, cap(v), len(v))
		}
	}
}

// TestCloseWaitsOnceForAHungBroker: two sinks and the DLQ each hold a
// record a hung broker never answers. Shutdown waits closeFlushWait for
// them once, not once per producer (three producers one after the other
// held it three times as long).
func TestCloseWaitsOnceForAHungBroker(t *testing.T) {
	t.Parallel()
	c := workertest.Cluster(t, 1, []string{"out", "dlq"})
	held := workertest.HangProduce(c)
	addrs := c.ListenAddrs()
	cfg := config.Default()
	cfg.Executor.BinaryPath = "/bin/cat"
	cfg.Sources.HTTP.Enabled, cfg.Sources.HTTP.Host = true, "127.0.0.1"
	cfg.Sinks.Kafka = []config.KafkaSink{{Name: "a", Topic: "out", Brokers: addrs}, {Name: "b", Topic: "out", Brokers: addrs}}
	cfg.DLQ.Topic, cfg.DLQ.Brokers = "dlq", addrs
	ss := newTestSet(t, &cfg)
	for _, cl := range []*kgo.Client{ss.byName["a"].cl.client(), ss.byName["b"].cl.client(), ss.dlq.cl.client()} {
		cl.Produce(context.Background(), &kgo.Record{Topic: "out", Value: []byte("v")}, nil)
	}
	wait.For(t, wait.Long, "every producer's record reaches the hung broker", func() (bool, string) {
		n := held.Load()
		return n >= 3, fmt.Sprintf("%d of 3 held", n)
	})
	start := time.Now()
	ss.Close()
	took := time.Since(start)
	if took < closeFlushWait || took >= 2*closeFlushWait {
		t.Errorf("Close took %v with three producers waiting on a hung broker, want about %v once", took, closeFlushWait)
	}
}

// newTestSet resolves and validates cfg and builds its sink set.
func newTestSet(t *testing.T, cfg *config.Config) *Set {
	t.Helper()
	cfg.Resolve()
	if problems := cfg.Validate(); len(problems) > 0 {
		t.Fatal(problems)
	}
	ss, err := New(cfg, prometheus.NewRegistry(), nil, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	return ss
}
