package kafkaread

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"svc/worker/kconn"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Test topics are named so that a leak into an error text is easy to spot.
const (
	topicIn   = "raw-topic-in"
	topicOut  = "raw-topic-out"
	topicDLQ  = "raw-topic-in_dlq"
	topicBig  = "raw-topic-big"
	topicComp = "raw-topic-compacted"
)

// newCluster starts a one-broker kfake cluster on loopback.
func newCluster(t testing.TB, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1)}, opts...)...)
	if err != nil {
		t.Fatalf("kfake.NewCluster: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// newProducer returns a client that honours Record.Partition.
func newProducer(t testing.TB, addrs []string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(addrs...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.MetadataMinAge(50 * time.Millisecond),
	}, opts...)...)
	if err != nil {
		t.Fatalf("kgo.NewClient: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// produce writes recs to topic in one call (records of a partition share
// batches) and fails the test on any error.
func produce(t testing.TB, cl *kgo.Client, topic string, recs ...*kgo.Record) {
	t.Helper()
	for _, r := range recs {
		r.Topic = topic
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

// rec builds a record for partition p with timestamp ts (epoch ms).
func rec(p int32, ts int64, key, val string) *kgo.Record {
	r := &kgo.Record{Partition: p, Timestamp: time.UnixMilli(ts), Value: []byte(val)}
	if key != "" {
		r.Key = []byte(key)
	}
	return r
}

// sourceReader builds a Reader whose `source` alias reads topic on c.
func sourceReader(t testing.TB, c *kfake.Cluster, topic string, opts ...Option) *Reader {
	t.Helper()
	aliases, _ := BuildAliases(AliasInput{
		SourceEnabled: true, SourceTopic: topic, SourceConn: kconn.Conn{Brokers: c.ListenAddrs()},
	})
	r, err := New(aliases, opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return r
}

// collect runs Stream and returns the emitted records.
func collect(t testing.TB, r *Reader, alias string, q StreamQuery) ([]Record, error) {
	t.Helper()
	var out []Record
	err := r.Stream(t.Context(), alias, q, func(rec Record) error {
		out = append(out, rec)
		return nil
	})
	return out, err
}

// assertNoLeak fails when err's text names a raw topic or a broker address.
func assertNoLeak(t testing.TB, err error, addrs []string) {
	t.Helper()
	if err == nil {
		return
	}
	text := err.Error()
	for _, bad := range append([]string{"raw-topic", "127.0.0.1", "localhost"}, addrs...) {
		if strings.Contains(text, bad) {
			t.Errorf("error text %q contains %q", text, bad)
		}
	}
}

// settleGoroutines waits until the goroutine count is at most want.
func settleGoroutines(want int) int {
	n := runtime.NumGoroutine()
	for deadline := time.Now().Add(5 * time.Second); n > want && time.Now().Before(deadline); n = runtime.NumGoroutine() {
		time.Sleep(20 * time.Millisecond)
	}
	return n
}

func ptr[T any](v T) *T { return &v }

// isBrokerError reports a broker timeout or failure (the API's 502).
func isBrokerError(err error) bool {
	return errors.Is(err, ErrBrokerTimeout) || errors.Is(err, ErrBrokerFailure)
}
