package kafka

import (
	"bytes"
	"fmt"
	"sort"
	"strconv"
	"testing"
	"time"

	"svc/worker/model"
	"svc/worker/sink"
	"svc/worker/workertest"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestKafkaEndToEnd runs 10,000 keyed and unkeyed messages through
// Kafka → exec → Kafka: every ok message lands in the sink as exactly the
// executor's output, every failing one in the DLQ with the original
// key/value/headers and every svc-dlq-* header, messages of one key reach
// the sink in source order, and the group's commit reaches the high
// watermark of every partition.
func TestKafkaEndToEnd(t *testing.T) {
	t.Parallel()
	c := ktCluster(t, 6)
	addrs := c.ListenAddrs()
	cfg := ktConfig(t, addrs, workertest.EchoScript(t))
	start := time.Now()
	w := ktStart(t, cfg)

	n := 10_000
	if testing.Short() {
		n = 150 // the same checks on a sixtieth of the volume (2 failing)
	}
	recs := make([]*kgo.Record, n)
	failing := map[int]bool{}
	for i := range n {
		key := ""
		if i%10 != 0 { // one in ten has no key: no lane, runs unordered
			key = fmt.Sprintf("key-%d", i%37)
		}
		f := i%97 == 5
		if f {
			failing[i] = true
		}
		recs[i] = ktMsg(i, key, f)
	}
	ktProduce(t, ktClient(t, addrs), recs)
	adm := ktAdmin(t, addrs)
	ktWaitCommitted(t, adm, cfg.Sources.Kafka.Group)

	// Committed means delivered: read everything once, now.
	src := map[int]*kgo.Record{}
	for _, r := range ktReadAll(t, addrs, ktIn) {
		src[ktID(r.Value)] = r
	}
	if len(src) != n {
		t.Fatalf("source topic holds %d distinct ids, want %d", len(src), n)
	}
	sinkRecs, dlqRecs := ktReadAll(t, addrs, ktOut), ktReadAll(t, addrs, ktDLQ)
	out, dlq := ktCountIDs(sinkRecs), ktCountIDs(dlqRecs)
	ktCheckAllOut(t, ktIDs(0, n), out, dlq)
	for id := range n {
		switch {
		case failing[id] && out[id] > 0:
			t.Errorf("failing message %d reached the sink", id)
		case failing[id] && dlq[id] == 0:
			t.Errorf("failing message %d is not in the DLQ", id)
		case !failing[id] && dlq[id] > 0:
			t.Errorf("ok message %d reached the DLQ", id)
		case !failing[id] && out[id] == 0:
			t.Errorf("ok message %d is not in the sink", id)
		}
	}

	for _, r := range sinkRecs {
		id := ktID(r.Value)
		s := src[id]
		if s == nil {
			t.Errorf("sink record %q has no source message", r.Value)
			continue
		}
		if want := append([]byte("out:"), s.Value...); !bytes.Equal(r.Value, want) {
			t.Errorf("sink value of %d = %q, want the executor output %q", id, r.Value, want)
		}
		if !bytes.Equal(r.Key, s.Key) || (r.Key == nil) != (s.Key == nil) {
			t.Errorf("sink key of %d = %q, want %q", id, r.Key, s.Key)
		}
		for h, want := range map[string]string{
			sink.HeaderSource: model.SourceKafka, sink.HeaderWorker: cfg.Worker.Name,
			sink.HeaderSourcePartition: strconv.Itoa(int(s.Partition)), sink.HeaderSourceOffset: strconv.FormatInt(s.Offset, 10),
		} {
			if got, _ := ktHeader(r, h); got != want {
				t.Errorf("sink record of %d: header %s = %q, want %q", id, h, got, want)
			}
		}
		if got, _ := ktHeader(r, sink.HeaderTaskID); got == "" {
			t.Errorf("sink record of %d: no %s header", id, sink.HeaderTaskID)
		}
	}

	now := time.Now()
	for _, r := range dlqRecs {
		id := ktID(r.Value)
		s := src[id]
		if s == nil {
			t.Errorf("DLQ record %q has no source message", r.Value)
			continue
		}
		if !bytes.Equal(r.Value, s.Value) || !bytes.Equal(r.Key, s.Key) {
			t.Errorf("DLQ record of %d = key %q value %q, want the original key %q value %q", id, r.Key, r.Value, s.Key, s.Value)
		}
		if len(r.Headers) < len(s.Headers) {
			t.Errorf("DLQ record of %d has %d headers, want the %d original ones first", id, len(r.Headers), len(s.Headers))
			continue
		}
		for i, h := range s.Headers {
			if r.Headers[i].Key != h.Key || !bytes.Equal(r.Headers[i].Value, h.Value) {
				t.Errorf("DLQ record of %d: header %d = %s=%q, want the original %s=%q", id, i, r.Headers[i].Key, r.Headers[i].Value, h.Key, h.Value)
			}
		}
		for h, want := range map[string]string{
			sink.HeaderDLQAttempts: "2", sink.HeaderDLQWorker: cfg.Worker.Name,
			sink.HeaderDLQSourcePartition: strconv.Itoa(int(s.Partition)), sink.HeaderDLQSourceOffset: strconv.FormatInt(s.Offset, 10),
		} {
			if got, _ := ktHeader(r, h); got != want {
				t.Errorf("DLQ record of %d: header %s = %q, want %q", id, h, got, want)
			}
		}
		if got, _ := ktHeader(r, sink.HeaderDLQReason); got != "executor exited with code 1" {
			t.Errorf("DLQ record of %d: %s = %q, want the executor's failure", id, sink.HeaderDLQReason, got)
		}
		ts, _ := ktHeader(r, sink.HeaderDLQTS)
		ms, err := strconv.ParseInt(ts, 10, 64)
		if err != nil || ms < start.UnixMilli() || ms > now.UnixMilli() {
			t.Errorf("DLQ record of %d: %s = %q, want epoch ms between the test start and now", id, sink.HeaderDLQTS, ts)
		}
	}

	// Per-key order: within one sink partition the records of a key carry
	// ascending source offsets.
	type pk struct {
		p   int32
		key string
	}
	byKey := map[pk][]*kgo.Record{}
	for _, r := range sinkRecs {
		if r.Key != nil {
			k := pk{r.Partition, string(r.Key)}
			byKey[k] = append(byKey[k], r)
		}
	}
	keys := 0
	for k, rs := range byKey {
		sort.Slice(rs, func(i, j int) bool { return rs[i].Offset < rs[j].Offset })
		last := int64(-1)
		for _, r := range rs {
			h, _ := ktHeader(r, sink.HeaderSourceOffset)
			off, _ := strconv.ParseInt(h, 10, 64)
			switch {
			case off < last:
				t.Errorf("key %q: sink offset %d carries source offset %d after %d: out of order", k.key, r.Offset, off, last)
			case off == last:
				t.Logf("key %q: source offset %d delivered twice", k.key, off)
			}
			last = off
		}
		keys++
	}
	if keys != 37 {
		t.Errorf("sink holds %d keys, want the 37 keys of the input", keys)
	}

	if got := w.Metric("svc_kafka_messages_in_flight"); got != 0 {
		t.Errorf("svc_kafka_messages_in_flight = %v after the pipeline settled, want 0", got)
	}
	if got := w.Metric("svc_kafka_partitions_stalled"); got != 0 {
		t.Errorf("svc_kafka_partitions_stalled = %v, want 0", got)
	}
	if got, want := w.Metric("svc_dlq_records_total", "outcome", "sent"), float64(len(failing)); got < want {
		t.Errorf("svc_dlq_records_total{outcome=sent} = %v, want at least %v", got, want)
	}
	t.Logf("%d messages (%d failing) through the pipeline in %s", n, len(failing), time.Since(start).Round(time.Millisecond))
}
