package sink

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"svc/worker/config"
	"svc/worker/model"
	"svc/worker/workertest"
	"svc/worker/workertest/wait"
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
func limitTestSet(t testing.TB, c *kfake.Cluster, logs *workertest.Logs, adjust func(*config.Config)) *Set {
	t.Helper()
	addrs := c.ListenAddrs()
	cfg := config.Default()
	cfg.Executor.BinaryPath = "/bin/cat"
	cfg.Sources.HTTP.Enabled, cfg.Sources.HTTP.SinksEnabled, cfg.Sources.HTTP.Host = true, true, "127.0.0.1"
	cc := map[string]string{"metadata.max.age.ms": "500"}
	cfg.Sinks.Kafka = []config.KafkaSink{{Name: "out", Topic: "out", Brokers: addrs, ClientConfig: cc}}
	cfg.DLQ.Topic, cfg.DLQ.Brokers, cfg.DLQ.ClientConfig = "dlq", addrs, cc
	if adjust != nil {
		adjust(&cfg)
	}
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
func okResult(id string, n int) *model.TaskResult {
	msg := &model.Message{Source: model.SourceHTTP, Value: []byte("in-" + id)}
	return &model.TaskResult{Task: &model.Task{ID: id, Msg: msg}, Status: model.StatusOK, Output: bytes.Repeat([]byte("o"), n)}
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
	ctx, cancel := context.WithTimeout(t.Context(), wait.Long)
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
	ss := limitTestSet(t, c, logs, nil)

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
	if got := ss.byName["out"].cl.client().OptValue(kgo.ProducerBatchMaxBytesFn).(func(string) int32)("out"); got != 65536 {
		t.Errorf("the sink's batch cap = %d, want the topic's 65536", got)
	}
	var logged []map[string]any
	for _, l := range logs.Named("kafka_max_message_bytes") {
		if l["target"] == "sink out" {
			logged = append(logged, l)
		}
	}
	if len(logged) != 1 || logged[0]["level"] != "WARN" || logged[0]["max_message_bytes"] != 65536.0 || logged[0]["from"] != "topic" {
		t.Errorf("kafka_max_message_bytes logs of sink out = %v, want one WARN: 65536 from the topic", logged)
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
	ss := limitTestSet(t, c, logs, nil)
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

// failedResult is a failed Kafka task result whose message has a value of
// n bytes, a key and one header of its own.
func failedResult(id string, n int) *model.TaskResult {
	msg := &model.Message{Source: model.SourceKafka, Partition: 0, Offset: 7, Key: []byte("key-" + id),
		Value: bytes.Repeat([]byte("i"), n), Headers: []model.Header{{Key: "trace", Value: []byte("abc")}}}
	return &model.TaskResult{Task: &model.Task{ID: id, Msg: msg}, Status: model.StatusFailed, Err: errors.New("exit 1"), Attempts: 2}
}

// TestFit: a DLQ record over its limit loses the end of its value first
// and says so; only when the rest alone is too large do the message's own
// headers, then its key go; limit 0 leaves only the svc-* headers.
func TestFit(t *testing.T) {
	t.Parallel()
	d := &DLQ{topic: "dlq", worker: "w"}
	res := failedResult("t", 10_000)
	rec := d.record(res)
	if n := fit(rec, 1, 100_000); n != -1 || len(rec.Value) != 10_000 {
		t.Fatalf("fit under the limit = %d with %d value bytes, want -1 and the record untouched", n, len(rec.Value))
	}
	for _, limit := range []int{4096, 4097, 5000} {
		rec := d.record(res)
		if n := fit(rec, 1, limit); n != 10_000 || RecordSize(rec) > limit || RecordSize(rec) < limit-4 {
			t.Errorf("fit(%d) = %d, RecordSize %d, want 10000 and a record of %d bytes at most, filled", limit, n, RecordSize(rec), limit)
		}
		if header(rec, HeaderDLQTruncated) != "10000" || header(rec, "trace") != "abc" || string(rec.Key) != "key-t" {
			t.Errorf("fit(%d) lost more than the value's end: key %q, headers %v", limit, rec.Key, rec.Headers)
		}
	}
	big := failedResult("t", 100)
	big.Task.Msg.Headers[0].Value = bytes.Repeat([]byte("h"), 5000)
	rec = d.record(big)
	if n := fit(rec, 1, 2048); n != 100 || len(rec.Value) == 0 || header(rec, "trace") != "" || string(rec.Key) != "key-t" || RecordSize(rec) > 2048 {
		t.Errorf("fit with a 5000-byte header of its own: value %d bytes, key %q, headers %v", len(rec.Value), rec.Key, rec.Headers)
	}
	rec = d.record(res)
	if n := fit(rec, 1, 0); n != 10_000 || len(rec.Value) != 0 || rec.Key != nil || header(rec, "trace") != "" || header(rec, HeaderDLQReason) != "exit 1" || header(rec, HeaderDLQTruncated) != "10000" {
		t.Errorf("fit(0): value %d bytes, key %q, headers %v; want only the svc-* headers", len(rec.Value), rec.Key, rec.Headers)
	}
}

// TestDLQCutsToTheTopicLimit: the DLQ learns its topic's limit from the
// brokers and cuts a larger record's value to fit. With
// dlq.max_message_bytes above what the topic really takes, the broker's
// refusal has the brokers asked for the topic's limit and the record is
// cut to it and sent again; when the brokers do not tell it, the record
// refused alone goes as a bare record (value, key and own headers
// dropped). Never a failed send.
func TestDLQCutsToTheTopicLimit(t *testing.T) {
	t.Parallel()
	c := workertest.Cluster(t, 1, []string{"out", "dlq"})
	setTopicLimit(t, c, "dlq", 16384)
	logs := &workertest.Logs{}
	ss := limitTestSet(t, c, logs, nil)
	if err := ss.Deliver(t.Context(), failedResult("a", 40_000)); err != nil {
		t.Fatalf("Deliver(failed, 40 KB) = %v", err)
	}
	// random40k is a failed result whose 40 KB value no codec shrinks
	// (the broker counts compressed batches).
	random40k := func(id string) *model.TaskResult {
		res := failedResult(id, 0)
		res.Task.Msg.Value = make([]byte, 40_000)
		_, _ = rand.Read(res.Task.Msg.Value)
		return res
	}
	wrong := limitTestSet(t, c, logs, func(cfg *config.Config) { cfg.DLQ.MaxMessageBytes = 65536 })
	if err := wrong.Deliver(t.Context(), random40k("b")); err != nil {
		t.Fatalf("Deliver(failed, 40 KB) with too high a dlq.max_message_bytes = %v, want the record cut to the topic's limit", err)
	}
	denyDescribeConfigs(c)
	blind := limitTestSet(t, c, logs, func(cfg *config.Config) { cfg.DLQ.MaxMessageBytes = 65536 })
	if err := blind.Deliver(t.Context(), random40k("c")); err != nil {
		t.Fatalf("Deliver(failed, 40 KB) with too high a dlq.max_message_bytes, brokers not describing the topic = %v, want a bare record sent", err)
	}
	recs := readAll(t, c, "dlq")
	if len(recs) != 3 {
		t.Fatalf("%d DLQ records, want 3", len(recs))
	}
	for _, r := range recs[:2] {
		if header(r, HeaderDLQTruncated) != "40000" || len(r.Value) < 16000 || len(r.Value) >= 16384 || header(r, "trace") != "abc" || r.Key == nil {
			t.Errorf("record %s: value %d bytes, key %q, headers %v; want the value cut to about 16 KB, the rest kept", header(r, HeaderTaskID), len(r.Value), r.Key, r.Headers)
		}
	}
	bare := recs[2]
	if header(bare, HeaderDLQTruncated) != "40000" || len(bare.Value) != 0 || bare.Key != nil || header(bare, "trace") != "" || header(bare, HeaderDLQReason) != "exit 1" {
		t.Errorf("record c: value %d bytes, key %q, headers %v; want a bare record", len(bare.Value), bare.Key, bare.Headers)
	}
	cut := logs.Named("dlq_record_truncated")
	if len(cut) != 3 || cut[0]["value_bytes"] != 40000.0 || cut[0]["error"] != nil || cut[1]["error"] == nil || cut[2]["error"] == nil {
		t.Errorf("dlq_record_truncated logs = %v, want three, the last two naming the broker's refusal", cut)
	}
	if got := wrong.dlq.limit.get(); got != 16384 {
		t.Errorf("the DLQ limit after the refusal = %d, want the topic's 16384", got)
	}
}
