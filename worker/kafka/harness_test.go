package kafka

// Test harness for the Kafka pipeline: an in-process kfake cluster, a
// config with the Kafka source on and short intervals, small /bin/sh
// executors, the pipeline running under the worker's lifecycle, and
// helpers that read topics, committed offsets and metrics the way an
// operator would see them.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"svc/worker"
	"svc/worker/config"
	"svc/worker/model"
	"svc/worker/sink"
	"svc/worker/workertest"
	"svc/worker/workertest/wait"
)

// Topics every test cluster is seeded with: the source, the sink and the
// default DLQ ({sources.kafka.topic}_dlq).
const (
	ktIn  = "in"
	ktOut = "out"
	ktDLQ = "in_dlq"
)

// ktWait is the generous deadline for anything the pipeline must
// eventually do; tests never assert how fast it happens.
const ktWait = wait.Long

// ktCluster starts a one-broker kfake cluster seeded with the test topics.
func ktCluster(t testing.TB, partitions int32, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	return workertest.Cluster(t, partitions, []string{ktIn, ktOut, ktDLQ}, opts...)
}

// ktConfig is a valid config with the Kafka source on brokers, one sink
// "out" on the same cluster, the default DLQ in_dlq, short intervals and
// startup alignment off. Callers adjust it, then ktStart validates it.
func ktConfig(t testing.TB, brokers []string, executor string) *config.Config {
	t.Helper()
	cfg := config.Default()
	name := workertest.UniqueName("kt")
	cfg.Worker.Name = name
	cfg.Worker.ShutdownTimeout = config.Duration(20 * time.Second)
	cfg.UI.Enabled = false
	cfg.Metrics.Enabled = false
	cfg.RuntimeHealth.Enabled = false
	cfg.Storage.Dir = ""
	cfg.Executor.BinaryPath = executor
	cfg.Executor.PoolSize = 4
	cfg.Executor.Timeout = config.Duration(60 * time.Second)
	cfg.Handler.MaxAttempts = 2
	cfg.Handler.RetryBackoff = config.Duration(time.Millisecond)
	cfg.Pipeline.MaxInFlight = 64
	k := &cfg.Sources.Kafka
	k.Enabled = true
	k.Brokers = brokers
	k.Topic = ktIn
	k.Group = "g-" + name
	k.StartupAlignEnabled = false
	k.CommitInterval = config.Duration(200 * time.Millisecond)
	k.MaxPollRecords = 200
	k.RevokeTimeout = config.Duration(20 * time.Second)
	k.ClientConfig = map[string]string{
		"metadata.max.age.ms":   "1000",
		"session.timeout.ms":    "6000",
		"heartbeat.interval.ms": "500",
	}
	cfg.Sinks.Kafka = []config.KafkaSink{{
		Name: "out", Topic: ktOut, DeliveryTimeout: config.Duration(5 * time.Second),
		Breaker: config.Breaker{FailureThreshold: 3, OpenTimeout: config.Duration(time.Second)},
	}}
	cfg.DLQ.SendTimeout = config.Duration(5 * time.Second)
	return &cfg
}

// ktWorker is the pipeline with its Kafka source, run under the worker's
// lifecycle as `svc run` runs it.
type ktWorker struct {
	t      testing.TB
	App    *worker.App
	Src    *Source // nil when the Kafka source is off
	Sinks  *sink.Set
	Events *model.Events
	Reg    *prometheus.Registry
	Logs   *workertest.Logs
	built  Built
	stop   context.CancelFunc
	done   chan error
	once   sync.Once
}

// ktNew builds the pipeline without running it.
func ktNew(t testing.TB, cfg *config.Config) *ktWorker {
	t.Helper()
	return ktNewWith(t, cfg, nil)
}

// ktNewWith is ktNew with a custom handler (nil: the exec handler).
func ktNewWith(t testing.TB, cfg *config.Config, handler any) *ktWorker {
	t.Helper()
	cfg.Resolve()
	if problems := cfg.Validate(); len(problems) > 0 {
		t.Fatalf("test config invalid:\n%s", strings.Join(problems, "\n"))
	}
	logs := &workertest.Logs{}
	b := BuildWorker(t, cfg, handler, logs.Logger())
	w := &ktWorker{t: t, App: b.App, Src: b.Src, Sinks: b.Sinks, Events: b.Events, Reg: b.Registry, Logs: logs, built: b}
	t.Cleanup(func() {
		w.Stop()
		if t.Failed() {
			t.Logf("logs of worker %s:\n%s", cfg.Worker.Name, workertest.Tail(w.Logs.String(), 80))
		}
	})
	return w
}

// ktStart builds the pipeline and runs it.
func ktStart(t testing.TB, cfg *config.Config) *ktWorker {
	t.Helper()
	return ktStartWith(t, cfg, nil)
}

// ktStartWith is ktStart with a custom handler.
func ktStartWith(t testing.TB, cfg *config.Config, handler any) *ktWorker {
	t.Helper()
	w := ktNewWith(t, cfg, handler)
	w.Start()
	return w
}

// Start runs the lifecycle in a goroutine.
func (w *ktWorker) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	w.stop, w.done = cancel, make(chan error, 1)
	go func() { w.done <- w.built.Run(ctx) }()
}

// Stop shuts the worker down like `svc run` on SIGTERM: intake stops (the
// source drains and commits), then the drain, then the sinks close.
func (w *ktWorker) Stop() {
	w.once.Do(func() {
		if w.stop == nil {
			w.built.Close()
			return
		}
		w.stop()
		select {
		case err := <-w.done:
			if err != nil {
				w.t.Errorf("Lifecycle.Run = %v, want nil", err)
			}
		case <-time.After(ktWait):
			w.t.Errorf("Lifecycle.Run did not return %s after its context ended", ktWait)
		}
	})
}

// Owned is the partitions the worker's consumer owns now.
func (w *ktWorker) Owned() []int32 {
	if w.Src == nil {
		return nil
	}
	return w.Src.assignedPartitions()
}

// InFlight is the number of messages started and not finished.
func (w *ktWorker) InFlight() int { return w.Src.runningCount() }

// Executing and Delivering split InFlight: messages running their tasks
// (at most max_in_flight) and messages delivering their results.
func (w *ktWorker) Executing() int {
	w.Src.mu.Lock()
	defer w.Src.mu.Unlock()
	return w.Src.executing
}

func (w *ktWorker) Delivering() int {
	w.Src.mu.Lock()
	defer w.Src.mu.Unlock()
	return w.Src.running - w.Src.executing
}

// Waiting is the number of polled messages not started yet.
func (w *ktWorker) Waiting() int {
	w.Src.mu.Lock()
	defer w.Src.mu.Unlock()
	return w.Src.waiting
}

// Metric sums the samples of family name whose labels include want.
func (w *ktWorker) Metric(name string, want ...string) float64 {
	return workertest.Metric(w.t, w.Reg, name, want...)
}

// WaitJoined waits until the worker owns at least one partition.
func (w *ktWorker) WaitJoined() {
	w.t.Helper()
	// Ready too: the assignment callback publishes the partitions first,
	// then logs partitions_assigned and marks the source ready. The
	// client too: on loopback the group can be joined (the callback run)
	// before Run has stored the client it just created.
	wait.For(w.t, ktWait, "worker owns partitions", func() (bool, string) {
		ready, reasons := w.App.Ready()
		return len(w.Owned()) > 0 && ready && w.client() != nil, fmt.Sprint("owned ", w.Owned(), ", not ready: ", reasons, ", client stored: ", w.client() != nil)
	})
}

// ktClient is a plain client on the cluster (producer, admin).
func ktClient(t testing.TB, addrs []string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	base := []kgo.Opt{kgo.SeedBrokers(addrs...), kgo.MetadataMinAge(100 * time.Millisecond),
		kgo.ProducerLinger(0), kgo.MaxBufferedRecords(100_000)}
	cl, err := kgo.NewClient(append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// ktManual is a producer that honours Record.Partition.
func ktManual(t testing.TB, addrs []string) *kgo.Client {
	return ktClient(t, addrs, kgo.RecordPartitioner(kgo.ManualPartitioner()))
}

// ktProduce writes recs and fails the test on any error.
func ktProduce(t testing.TB, cl *kgo.Client, recs []*kgo.Record) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), ktWait)
	defer cancel()
	for len(recs) > 0 {
		n := min(len(recs), 2000)
		if err := cl.ProduceSync(ctx, recs[:n]...).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
		recs = recs[n:]
	}
}

// ktMsg is a test message: the payload carries the id (and "fail" for a
// message the executor rejects); a header carries it too.
func ktMsg(id int, key string, fail bool) *kgo.Record {
	v := fmt.Sprintf("id=%d key=%s", id, key)
	if fail {
		v += " fail"
	}
	r := &kgo.Record{Topic: ktIn, Value: []byte(v), Headers: []kgo.RecordHeader{
		{Key: "h-id", Value: []byte(strconv.Itoa(id))}, {Key: "h-bin", Value: []byte{0, 1, 0xff}},
	}}
	if key != "" {
		r.Key = []byte(key)
	}
	return r
}

// ktID extracts the message id from a source, sink ("out:" prefix) or DLQ
// value; -1 when there is none.
func ktID(v []byte) int {
	s := strings.TrimPrefix(string(v), "out:")
	s, ok := strings.CutPrefix(s, "id=")
	if !ok {
		return -1
	}
	if i := strings.IndexByte(s, ' '); i >= 0 {
		s = s[:i]
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return -1
	}
	return n
}

// ktAdmin is an admin client on the cluster.
func ktAdmin(t testing.TB, addrs []string) *kadm.Client {
	return kadm.NewClient(ktClient(t, addrs))
}

// ktEnds returns the high watermark of every partition of topic.
func ktEnds(t testing.TB, adm *kadm.Client, topic string) map[int32]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	l, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = l.Error()
	}
	if err != nil {
		t.Fatalf("ListEndOffsets %s: %v", topic, err)
	}
	out := map[int32]int64{}
	l.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
	return out
}

// ktCommitted returns the group's committed offsets on the source topic
// (partitions without a commit are absent).
func ktCommitted(t testing.TB, adm *kadm.Client, group string) map[int32]int64 {
	t.Helper()
	return ktCommittedOn(t, adm, group, ktIn)
}

// ktCommittedOn returns the group's committed offsets on topic.
func ktCommittedOn(t testing.TB, adm *kadm.Client, group, topic string) map[int32]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	r, err := adm.FetchOffsets(ctx, group)
	if errors.Is(err, kerr.GroupIDNotFound) { // nothing committed yet
		return map[int32]int64{}
	}
	if err != nil {
		t.Fatalf("FetchOffsets %s: %v", group, err)
	}
	out := map[int32]int64{}
	for p, o := range r[topic] {
		if o.Err == nil && o.At >= 0 {
			out[p] = o.At
		}
	}
	return out
}

// ktSum adds up the values of m.
func ktSum(m map[int32]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}

// ktWaitCommitted waits until the group's commit reached the source
// topic's high watermark on every partition. It fails only when the commit
// stopped moving for ktWait: a slow, loaded machine takes longer, a stuck
// pipeline does not move.
func ktWaitCommitted(t testing.TB, adm *kadm.Client, group string) {
	t.Helper()
	ktWaitProgress(t, ktWait, "committed offsets reach the high watermarks", func() (bool, int64, string) {
		ends, got := ktEnds(t, adm, ktIn), ktCommitted(t, adm, group)
		for p, end := range ends {
			if end > 0 && got[p] != end {
				return false, ktSum(got), fmt.Sprintf("high watermarks %v, committed %v", ends, got)
			}
		}
		return true, 0, ""
	})
}

// ktWaitProgress polls cond every 50ms until it reports done; it fails when
// the progress cond reports has not grown for stuck.
func ktWaitProgress(t testing.TB, stuck time.Duration, what string, cond func() (done bool, progress int64, detail string)) {
	t.Helper()
	start := time.Now()
	best, moved := int64(-1), time.Now()
	for {
		done, progress, detail := cond()
		if done {
			return
		}
		if progress > best {
			best, moved = progress, time.Now()
		}
		if time.Since(moved) > stuck {
			t.Fatalf("%s: no progress for %s (after %s in all): %s", what, stuck, time.Since(start).Round(time.Second), detail)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// ktReadAll reads every record of topic up to the high watermarks taken
// when it starts, with a plain assign-only consumer.
func ktReadAll(t testing.TB, addrs []string, topic string) []*kgo.Record {
	t.Helper()
	return ktRead(t, addrs, topic, false)
}

// ktReadCommitted reads topic from the start as a read_committed consumer
// does, up to the end of what is committed now.
func ktReadCommitted(t testing.TB, addrs []string, topic string) []*kgo.Record {
	t.Helper()
	return ktRead(t, addrs, topic, true)
}

// ktRead reads topic from the start to the high watermarks taken when it
// starts. Read committed, transaction markers (never returned) and
// aborted records take offsets, so the read ends once every partition's
// last stable offset has reached its end and a second passed without
// records; otherwise once every offset below the ends was read.
func ktRead(t testing.TB, addrs []string, topic string, committed bool) []*kgo.Record {
	t.Helper()
	adm := kadm.NewClient(ktClient(t, addrs))
	ends := ktEnds(t, adm, topic)
	parts := map[int32]kgo.Offset{}
	for p, end := range ends {
		if end > 0 {
			parts[p] = kgo.NewOffset().AtStart()
		}
	}
	if len(parts) == 0 {
		return nil
	}
	opts := []kgo.Opt{kgo.SeedBrokers(addrs...), kgo.FetchMaxWait(100 * time.Millisecond),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: parts})}
	if committed {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), ktWait)
	defer cancel()
	next, stable := map[int32]int64{}, map[int32]bool{}
	idle := time.Now()
	done := func() bool {
		if committed {
			return len(stable) == len(parts) && time.Since(idle) > time.Second
		}
		for p, end := range ends {
			if next[p] < end {
				return false
			}
		}
		return true
	}
	var out []*kgo.Record
	for !done() {
		pctx, pcancel := context.WithTimeout(ctx, 200*time.Millisecond)
		f := cl.PollFetches(pctx)
		pcancel()
		if ctx.Err() != nil {
			t.Fatalf("read %s (committed %v): reached %v, stable %v of %v before the deadline", topic, committed, next, stable, ends)
		}
		f.EachError(func(_ string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Logf("read %s[%d]: %v", topic, p, err)
			}
		})
		f.EachPartition(func(p kgo.FetchTopicPartition) {
			if _, ok := parts[p.Partition]; ok && p.LastStableOffset >= ends[p.Partition] {
				stable[p.Partition] = true
			}
			for _, r := range p.Records {
				if r.Offset < ends[r.Partition] {
					out = append(out, r)
					idle = time.Now()
				}
				next[r.Partition] = r.Offset + 1
			}
		})
	}
	return out
}

// ktCountIDs counts the records of each message id.
func ktCountIDs(recs []*kgo.Record) map[int]int {
	out := map[int]int{}
	for _, r := range recs {
		out[ktID(r.Value)]++
	}
	return out
}

// ktHeader returns the value of the last header named key.
func ktHeader(r *kgo.Record, key string) (string, bool) {
	v, ok := "", false
	for _, h := range r.Headers {
		if h.Key == key {
			v, ok = string(h.Value), true
		}
	}
	return v, ok
}

// ktCheckAllOut checks that every id in want is in the sink or the DLQ:
// a missing one is an error, duplicates are counted and logged.
func ktCheckAllOut(t testing.TB, want []int, sink, dlq map[int]int) (duplicates int) {
	t.Helper()
	var missing []int
	dups := 0
	for _, id := range want {
		n := sink[id] + dlq[id]
		if n == 0 {
			missing = append(missing, id)
		}
		if n > 1 {
			dups += n - 1
		}
	}
	if len(missing) > 0 {
		sort.Ints(missing)
		t.Errorf("%d of %d messages lost (neither in the sink nor in the DLQ), first ones: %v", len(missing), len(want), missing[:min(20, len(missing))])
	}
	t.Logf("%d messages checked: %d duplicate deliveries (at-least-once allows them)", len(want), dups)
	return dups
}

// ktCollect reads the sink topic (on sinkAddrs) and the DLQ (on addrs)
// and counts the records of each message id.
func ktCollect(t testing.TB, addrs, sinkAddrs []string) (sink, dlq map[int]int) {
	t.Helper()
	return ktCountIDs(ktReadAll(t, sinkAddrs, ktOut)), ktCountIDs(ktReadAll(t, addrs, ktDLQ))
}

// ktIDs returns 0..n-1 offset by from.
func ktIDs(from, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = from + i
	}
	return out
}

// client is the running consumer (nil before Run created it).
func (w *ktWorker) client() *kgo.Client { return w.Src.client() }

// IntakePaused reports whether the consumer has fetching of the source
// topic paused (consume pause or backpressure).
func (w *ktWorker) IntakePaused() bool {
	cl := w.client()
	return cl != nil && slices.Contains(cl.PauseFetchTopics(), ktIn)
}

// StallPaused returns the partitions paused one by one (stalls).
func (w *ktWorker) StallPaused() []int32 {
	cl := w.client()
	if cl == nil {
		return nil
	}
	ps := cl.PauseFetchPartitions(nil)[ktIn]
	slices.Sort(ps)
	return ps
}

// Settled reports whether nothing is in flight and every finished offset
// has been committed.
func (w *ktWorker) Settled() bool {
	s := w.Src
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running > 0 || s.waiting > 0 {
		return false
	}
	for _, st := range s.parts {
		if st.commit.Offset >= 0 && st.commit.Offset != st.sent {
			return false
		}
	}
	return true
}

// WaitSettled waits until Settled.
func (w *ktWorker) WaitSettled() {
	w.t.Helper()
	wait.For(w.t, ktWait, "in-flight work finishes and is committed", func() (bool, string) {
		return w.Settled(), fmt.Sprintf("%d in flight, %d waiting", w.InFlight(), w.Waiting())
	})
}

// QueueDetail describes each partition's queues and the partitions paused
// one by one, for failure messages.
func (w *ktWorker) QueueDetail() string {
	sp := w.StallPaused()
	s := w.Src
	s.mu.Lock()
	defer s.mu.Unlock()
	out := ""
	for p, st := range s.parts {
		out += fmt.Sprintf(" p%d: %d running, %d waiting (%d ready, %d lanes), saturated %v;", p, st.running, st.waiting, len(st.ready), len(st.lanes), st.saturated)
	}
	return out + fmt.Sprint(" paused one by one: ", sp)
}
