package sink

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"svc/worker/config"
	"svc/worker/model"
	"svc/worker/workertest"
	"svc/worker/workertest/wait"
)

// asyncSet builds a set with one sink "a" on topic out and a DLQ on dlq,
// whose topic limit is known (so DeliverAsync takes its fast path).
func asyncSet(t *testing.T, addrs []string, timeout time.Duration) *Set {
	t.Helper()
	cfg := config.Default()
	cfg.Executor.BinaryPath = "/bin/cat"
	cfg.Sources.HTTP.Enabled, cfg.Sources.HTTP.Host = true, "127.0.0.1"
	cfg.Sinks.Kafka = []config.KafkaSink{{Name: "a", Topic: "out", Brokers: addrs, DeliveryTimeout: config.Duration(timeout), MaxMessageBytes: 1 << 20}}
	cfg.DLQ.Topic, cfg.DLQ.Brokers = "dlq", addrs
	ss := newTestSet(t, &cfg)
	t.Cleanup(ss.Close)
	wait.For(t, wait.Long, "the sink's topic limit is known", func() (bool, string) {
		return ss.byName["a"].limit.ready(), "not yet"
	})
	return ss
}

// deliverAsync calls DeliverAsync and returns the channel done sends to.
func deliverAsync(ctx context.Context, ss *Set, res *model.TaskResult) <-chan error {
	ch := make(chan error, 2) // 2: a second call of done would be seen
	ss.DeliverAsync(ctx, res, func(err error) { ch <- err })
	return ch
}

func doneWithin(t *testing.T, ch <-chan error, d time.Duration, what string) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(d):
		t.Fatalf("%s: done not called within %v", what, d)
		return nil
	}
}

// TestDeliverAsyncDelivers: an ok result is produced without a goroutine
// waiting for it and done(nil) comes with the acknowledgement, once; the
// record is on the sink topic with its task's headers, and counted as
// delivered. A failed result goes to the DLQ, as with Deliver.
func TestDeliverAsyncDelivers(t *testing.T) {
	t.Parallel()
	c := workertest.Cluster(t, 1, []string{"out", "dlq"})
	ss := asyncSet(t, c.ListenAddrs(), 10*time.Second)
	ctx := context.Background()

	ch := deliverAsync(ctx, ss, okResult("t-1", 10))
	if err := doneWithin(t, ch, 10*time.Second, "ok result"); err != nil {
		t.Fatalf("done(%v), want nil", err)
	}
	failed := &model.TaskResult{Task: &model.Task{ID: "t-2"}, Status: model.StatusFailed, Err: errors.New("exit status 3"), Output: []byte("bad")}
	if err := doneWithin(t, deliverAsync(ctx, ss, failed), 10*time.Second, "failed result"); err != nil {
		t.Fatalf("failed result: done(%v), want nil (sent to the DLQ)", err)
	}
	select {
	case err := <-ch:
		t.Fatalf("done called twice (second: %v)", err)
	case <-time.After(50 * time.Millisecond):
	}
	if n := testutil.ToFloat64(ss.m.delivered.WithLabelValues("a")); n != 1 {
		t.Errorf("svc_sink_delivered_total{sink=a} = %v, want 1", n)
	}
	for topic, want := range map[string]string{"out": "t-1", "dlq": "t-2"} {
		recs := readTopic(t, c, topic, 1)
		if len(recs) != 1 || header(recs[0], HeaderTaskID) != want {
			t.Errorf("topic %s: %d records %v, want one of task %s", topic, len(recs), recs, want)
		}
	}
}

// TestDeliverAsyncSlowAndCancelled: a broker that never answers makes the
// pending delivery count a breaker failure per delivery_timeout (as
// Deliver's do), and the end of the context ends it at once with the
// context's error, without waiting for the producer.
func TestDeliverAsyncSlowAndCancelled(t *testing.T) {
	t.Parallel()
	c := workertest.Cluster(t, 1, []string{"out", "dlq"})
	held := workertest.HangProduce(c)
	ss := asyncSet(t, c.ListenAddrs(), 200*time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	ch := deliverAsync(ctx, ss, okResult("t-1", 1))
	ss.pendMu.Lock()
	pending := len(ss.pending)
	ss.pendMu.Unlock()
	if pending != 1 {
		t.Fatalf("%d deliveries pending after DeliverAsync, want 1 (the fast path)", pending)
	}
	wait.For(t, wait.Long, "two slow-delivery failures counted", func() (bool, string) {
		n := testutil.ToFloat64(ss.m.failures.WithLabelValues("a"))
		return n >= 2, fmt.Sprintf("%v failures, %d produce requests held", n, held.Load())
	})
	select {
	case err := <-ch:
		t.Fatalf("done(%v) before the broker answered or the context ended", err)
	default:
	}
	cancel()
	if err := doneWithin(t, ch, 2*time.Second, "cancelled delivery"); !errors.Is(err, context.Canceled) {
		t.Fatalf("done(%v), want context.Canceled", err)
	}
	// A context already ended goes the synchronous way: its error at once.
	if err := doneWithin(t, deliverAsync(ctx, ss, okResult("t-2", 1)), 2*time.Second, "ended context"); !errors.Is(err, context.Canceled) {
		t.Fatalf("done(%v) under an ended context, want context.Canceled", err)
	}
}

// TestDeliverSlowLogBounded: in an outage every pending delivery goes
// slow once per delivery_timeout and counts a breaker failure each time,
// but the sink logs sink_delivery_slow at most once per delivery_timeout,
// each line saying how many deliveries went slow since the one before,
// and none is left out. Asynchronous and synchronous deliveries share the
// bound.
func TestDeliverSlowLogBounded(t *testing.T) {
	t.Parallel()
	c := workertest.Cluster(t, 1, []string{"out", "dlq"})
	workertest.HangProduce(c)
	const timeout = 200 * time.Millisecond
	ss := asyncSet(t, c.ListenAddrs(), timeout)
	logs := &workertest.Logs{}
	ss.byName["a"].log = logs.Logger()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const n = 20
	start := time.Now()
	for i := range n {
		deliverAsync(ctx, ss, okResult(fmt.Sprintf("a-%d", i), 1))
	}
	for i := range 4 {
		go ss.Deliver(ctx, okResult(fmt.Sprintf("s-%d", i), 1))
	}
	failures := func() float64 { return testutil.ToFloat64(ss.m.failures.WithLabelValues("a")) }
	wait.For(t, wait.Long, "every pending delivery slow three times", func() (bool, string) {
		return failures() >= 3*(n+4), fmt.Sprintf("%v failures", failures())
	})
	elapsed := time.Since(start)
	got := failures()
	lines := logs.Named("sink_delivery_slow")
	if most := int(elapsed/timeout) + 1; len(lines) == 0 || len(lines) > most {
		t.Fatalf("%d sink_delivery_slow lines in %v with delivery_timeout %v, want 1-%d (%v slow deliveries)", len(lines), elapsed, timeout, most, got)
	}
	reported := 0.0
	for _, l := range lines {
		d, ok := l["deliveries"].(float64)
		if !ok || d < 1 {
			t.Fatalf("sink_delivery_slow line %v: deliveries %v, want a count >= 1", l, l["deliveries"])
		}
		reported += d
	}
	if reported > got {
		t.Fatalf("the lines report %v slow deliveries, %v were counted as breaker failures", reported, got)
	}
	// The deliveries end; those held back since the last line are
	// reported when its window ends: every slow delivery is in a line.
	cancel()
	wait.For(t, wait.Long, "every slow delivery reported", func() (bool, string) {
		sum := 0.0
		for _, l := range logs.Named("sink_delivery_slow") {
			sum += l["deliveries"].(float64)
		}
		return sum == failures(), fmt.Sprintf("lines report %v of %v slow deliveries", sum, failures())
	})
}

// TestDeliverAsyncRetriesAFailedProduce: a produce the broker refuses is
// counted as a failure, logged, and retried until it is acknowledged:
// done(nil) once, the record on the topic.
func TestDeliverAsyncRetriesAFailedProduce(t *testing.T) {
	t.Parallel()
	c := workertest.Cluster(t, 1, []string{"out", "dlq"})
	var refused atomic.Int32
	c.ControlKey(int16(kmsg.Produce), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := kr.(*kmsg.ProduceRequest)
		if refused.Load() >= 1 { // only the sink produces here
			return nil, nil, false
		}
		refused.Add(1)
		return workertest.RefuseProduce(req, kerr.InvalidRecord.Code), nil, true // not retried by the client
	})
	ss := asyncSet(t, c.ListenAddrs(), 10*time.Second)
	ch := deliverAsync(context.Background(), ss, okResult("t-1", 1))
	if err := doneWithin(t, ch, 10*time.Second, "refused then retried"); err != nil {
		t.Fatalf("done(%v), want nil", err)
	}
	if refused.Load() != 1 {
		t.Fatalf("broker refused %d produce requests, want 1", refused.Load())
	}
	if n := testutil.ToFloat64(ss.m.failures.WithLabelValues("a")); n < 1 {
		t.Errorf("svc_sink_delivery_failures_total{sink=a} = %v, want >= 1", n)
	}
	if recs := readTopic(t, c, "out", 1); len(recs) != 1 {
		t.Errorf("topic out holds %d records, want 1", len(recs))
	}
}

// TestSinkUnknownLoggedOnce: a task that names a sink that does not exist
// gets one sink_unknown line per unknown name through DeliverAsync as
// through Deliver, whichever way the result then goes (before, the async
// path's look and Deliver's each logged it).
func TestSinkUnknownLoggedOnce(t *testing.T) {
	t.Parallel()
	c := workertest.Cluster(t, 1, []string{"out", "dlq"})
	logs := &workertest.Logs{}
	ss := limitTestSet(t, c, logs, nil)
	wait.For(t, wait.Long, "the sink's topic limit is known", func() (bool, string) {
		return ss.byName["out"].limit.ready(), "not yet"
	})
	ctx := context.Background()
	for id, sinks := range map[string][]string{"only-unknown": {"nope"}, "known-and-unknown": {"out", "nope"}} {
		res := okResult(id, 10)
		res.Task.Sinks = sinks
		if err := doneWithin(t, deliverAsync(ctx, ss, res), 10*time.Second, id); err != nil {
			t.Errorf("%s: done(%v), want nil", id, err)
		}
	}
	if err := ss.Deliver(ctx, func() *model.TaskResult {
		res := okResult("sync", 10)
		res.Task.Sinks = []string{"nope"}
		return res
	}()); err != nil {
		t.Errorf("Deliver: %v", err)
	}
	got := map[string]int{}
	for _, l := range logs.Named("sink_unknown") {
		got[fmt.Sprint(l["task_id"])]++
	}
	for _, id := range []string{"only-unknown", "known-and-unknown", "sync"} {
		if got[id] != 1 {
			t.Errorf("task %s: sink_unknown logged %d times, want once (all: %v)", id, got[id], got)
		}
	}
	if recs := readTopic(t, c, "out", 1); len(recs) != 1 || header(recs[0], HeaderTaskID) != "known-and-unknown" {
		t.Errorf("topic out holds %v, want the one result that named it", recs)
	}
}
