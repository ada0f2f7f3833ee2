package sink

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"svc/worker"
	"svc/worker/config"
	"svc/worker/workertest"
)

// TestRecordSize: a record of RecordSize up to the producer's batch cap is
// taken; past it, by at most 4 bytes (what the broker does not count),
// the producer refuses it (kerr.MessageTooLarge) before sending.
func TestRecordSize(t *testing.T) {
	t.Parallel()
	const limit = 4096
	c := workertest.Cluster(t, 1, []string{"t"})
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ProducerBatchMaxBytes(limit))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	hdrs := []kgo.RecordHeader{{Key: "svc-task-id", Value: []byte("t-1")}, {Key: "h", Value: bytes.Repeat([]byte("v"), 200)}}
	for _, tc := range []struct {
		key    int
		hdrs   []kgo.RecordHeader
		over   int
		refuse bool
	}{
		{0, nil, 0, false},
		{0, nil, 4, true},
		{300, hdrs, 0, false},
		{300, hdrs, 4, true},
		{0, nil, -200, false},
	} {
		rec := &kgo.Record{Topic: "t", Key: bytes.Repeat([]byte("k"), tc.key), Headers: tc.hdrs}
		for RecordSize(rec) < limit+tc.over { // grow the value until the size is limit+over
			rec.Value = append(rec.Value, 'v')
		}
		if RecordSize(rec) != limit+tc.over {
			t.Fatalf("RecordSize jumped past %d: %d", limit+tc.over, RecordSize(rec))
		}
		err := cl.ProduceSync(t.Context(), rec).FirstErr()
		if isTooLarge(err) != tc.refuse || (err != nil && !tc.refuse) {
			t.Errorf("key %d, %d headers, RecordSize %d against a cap of %d: produce = %v, want refused: %v", tc.key, len(tc.hdrs), RecordSize(rec), limit, err, tc.refuse)
		}
	}
}

// limitTestSet is a sink set on c: HTTP source with sinks, sink "out" and
// the DLQ "dlq", both on c.
func limitTestSet(t *testing.T, c *kfake.Cluster, logs *workertest.Logs) *Set {
	t.Helper()
	addrs := c.ListenAddrs()
	cfg := config.Default()
	cfg.Executor.BinaryPath = "/bin/cat"
	cfg.Sources.HTTP.Enabled, cfg.Sources.HTTP.SinksEnabled = true, true
	cc := map[string]string{"metadata.max.age.ms": "500"}
	cfg.Sinks.Kafka = []config.KafkaSink{{Name: "out", Topic: "out", Brokers: addrs, ClientConfig: cc}}
	cfg.DLQ.Topic, cfg.DLQ.Brokers, cfg.DLQ.ClientConfig = "dlq", addrs, cc
	cfg.Resolve()
	if problems := cfg.Validate(); len(problems) > 0 {
		t.Fatal(problems)
	}
	ss, err := New(&cfg, prometheus.NewRegistry(), nil, logs.Logger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ss.Close)
	return ss
}

// okResult is an ok HTTP task result with an output of n bytes.
func okResult(id string, n int) *worker.TaskResult {
	msg := &worker.Message{Source: worker.SourceHTTP, Value: []byte("in-" + id)}
	return &worker.TaskResult{Task: &worker.Task{ID: id, Msg: msg}, Status: worker.StatusOK, Output: bytes.Repeat([]byte("o"), n)}
}

// readTopic reads n records of partition 0 of topic on c.
func readTopic(t *testing.T, c *kfake.Cluster, topic string, n int) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.FetchMaxWait(100*time.Millisecond),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(t.Context(), workertest.Wait)
	defer cancel()
	var out []*kgo.Record
	for len(out) < n {
		f := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %s: %d of %d records before the deadline", topic, len(out), n)
		}
		out = append(out, f.Records()...)
	}
	return out
}

func header(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

// TestSinkLimitFromTopicConfig: a sink learns its topic's own
// max.message.bytes from the brokers at its first delivery, logs it (WARN:
// below executor.max_output_bytes), caps its batches at it, and sends a
// larger result's message to the DLQ with a reason instead of retrying it.
func TestSinkLimitFromTopicConfig(t *testing.T) {
	t.Parallel()
	c := workertest.Cluster(t, 1, []string{"out", "dlq"})
	adm := kadm.NewClient(workertestClient(t, c))
	v := "65536"
	if _, err := adm.AlterTopicConfigs(t.Context(), []kadm.AlterConfig{{Name: "max.message.bytes", Value: &v}}, "out"); err != nil {
		t.Fatal(err)
	}
	logs := &workertest.Logs{}
	ss := limitTestSet(t, c, logs)

	if err := ss.Deliver(t.Context(), okResult("small", 10<<10)); err != nil {
		t.Fatalf("Deliver(10 KiB) = %v", err)
	}
	if err := ss.Deliver(t.Context(), okResult("big", 100<<10)); err != nil {
		t.Fatalf("Deliver(100 KiB) = %v, want nil (the message goes to the DLQ)", err)
	}
	if err := ss.Deliver(t.Context(), okResult("after", 10<<10)); err != nil {
		t.Fatalf("Deliver(10 KiB) = %v", err)
	}
	out := readTopic(t, c, "out", 2)
	if len(out) != 2 || header(out[0], HeaderTaskID) != "small" || header(out[1], HeaderTaskID) != "after" {
		t.Errorf("sink records: %d, want the two small results", len(out))
	}
	dlq := readTopic(t, c, "dlq", 1)
	reason := header(dlq[0], HeaderDLQReason)
	if string(dlq[0].Value) != "in-big" || !strings.HasPrefix(reason, "result too large for sink out: ") || !strings.HasSuffix(reason, " bytes > limit 65536") {
		t.Errorf("DLQ record %q with reason %q, want the input in-big, \"result too large for sink out: N bytes > limit 65536\"", dlq[0].Value, reason)
	}
	if got := ss.byName["out"].cl.OptValue(kgo.ProducerBatchMaxBytesFn).(func(string) int32)("out"); got != 65536 {
		t.Errorf("the sink's batch cap = %d, want the topic's 65536", got)
	}
	logged := logs.Named("kafka_max_message_bytes")
	if len(logged) != 1 || logged[0]["level"] != "WARN" || logged[0]["max_message_bytes"] != 65536.0 || logged[0]["from"] != "topic" || logged[0]["target"] != "sink out" {
		t.Errorf("kafka_max_message_bytes logs = %v, want one WARN for sink out: 65536 from the topic", logged)
	}
	if tl := logs.Named("sink_record_too_large"); len(tl) != 1 || tl[0]["task_id"] != "big" || tl[0]["limit"] != 65536.0 {
		t.Errorf("sink_record_too_large logs = %v, want one for task big", tl)
	}
	if st := ss.BreakerStates()["out"]; st != Closed {
		t.Errorf("breaker %s, want closed", st)
	}
}

// TestSinkLimitUnknown: brokers that refuse to describe configs leave the
// sink at DefaultMaxMessageBytes, logged once; a result over it still goes
// to the DLQ with its reason.
func TestSinkLimitUnknown(t *testing.T) {
	t.Parallel()
	c := workertest.Cluster(t, 1, []string{"out", "dlq"})
	c.ControlKey(int16(kmsg.DescribeConfigs), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		r := req.(*kmsg.DescribeConfigsRequest)
		resp := r.ResponseKind().(*kmsg.DescribeConfigsResponse)
		for _, rr := range r.Resources {
			res := kmsg.NewDescribeConfigsResponseResource()
			res.ResourceName, res.ResourceType = rr.ResourceName, rr.ResourceType
			res.ErrorCode = kerr.TopicAuthorizationFailed.Code
			if rr.ResourceType == kmsg.ConfigResourceTypeBroker {
				res.ErrorCode = kerr.ClusterAuthorizationFailed.Code
			}
			resp.Resources = append(resp.Resources, res)
		}
		return resp, nil, true
	})
	logs := &workertest.Logs{}
	ss := limitTestSet(t, c, logs)
	for _, id := range []string{"big-1", "big-2"} {
		if err := ss.Deliver(t.Context(), okResult(id, 2<<20)); err != nil {
			t.Fatalf("Deliver(2 MiB) = %v, want nil (the message goes to the DLQ)", err)
		}
	}
	for _, r := range readTopic(t, c, "dlq", 2) {
		if reason := header(r, HeaderDLQReason); !strings.HasSuffix(reason, " bytes > limit 1048588") {
			t.Errorf("DLQ reason %q, want the default limit 1048588", reason)
		}
	}
	n := 0
	for _, l := range logs.Named("kafka_max_message_bytes_unknown") {
		if l["target"] == "sink out" && l["assumed"] == float64(DefaultMaxMessageBytes) {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d kafka_max_message_bytes_unknown logs for sink out, want 1: %s", n, logs.String())
	}
}

func workertestClient(t *testing.T, c *kfake.Cluster) *kgo.Client {
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}
