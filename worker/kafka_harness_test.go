package worker

// Test harness for the Kafka pipeline: an in-process kfake cluster, a
// config with the Kafka source on and short intervals, small /bin/sh
// executors, an App running in a goroutine, and helpers that read topics,
// committed offsets and metrics the way an operator would see them.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"svc/worker/config"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
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
const ktWait = 90 * time.Second

// ktCluster starts a one-broker kfake cluster seeded with the test topics.
// Group sessions may be as short as 500ms so that a killed member leaves
// the group quickly.
func ktCluster(t testing.TB, partitions int32, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	base := []kfake.Opt{
		kfake.NumBrokers(1),
		kfake.SeedTopics(partitions, ktIn, ktOut, ktDLQ),
		kfake.GroupMinSessionTimeout(500 * time.Millisecond),
	}
	c, err := kfake.NewCluster(append(base, opts...)...)
	if err != nil {
		t.Fatalf("kfake.NewCluster: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// ktFreePort returns a loopback port that was free a moment ago.
func ktFreePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// ktScript writes a /bin/sh executor into a fresh temp dir.
func ktScript(t testing.TB, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "executor.sh")
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// ktEchoBody prints "out:" + the payload and fails (exit 1) when the
// payload contains "fail". It forks nothing but itself: the payload is one
// line without a newline and read/printf are dash builtins.
const ktEchoBody = `IFS= read -r in
case "$in" in *fail*) echo "failing on purpose: $in" >&2; exit 1;; esac
printf 'out:%s' "$in"`

// ktEchoScript is the default executor of the pipeline tests.
func ktEchoScript(t testing.TB) string { return ktScript(t, ktEchoBody) }

// ktGate is an executor that holds every task until the gate file exists;
// it lets a test fill the pipeline and drain it at a moment of its choice.
type ktGate struct {
	Path string // executor
	file string
}

func ktGateScript(t testing.TB) *ktGate {
	t.Helper()
	g := &ktGate{file: filepath.Join(t.TempDir(), "gate-open")}
	g.Path = ktScript(t, `while [ ! -e '`+g.file+`' ]; do sleep 0.05; done
`+ktEchoBody)
	return g
}

func (g *ktGate) Open(t testing.TB) {
	t.Helper()
	if err := os.WriteFile(g.file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

func (g *ktGate) Close(t testing.TB) {
	t.Helper()
	if err := os.Remove(g.file); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
}

// ktName is a unique worker (and group) name.
func ktName(prefix string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return prefix + "-" + hex.EncodeToString(b[:])
}

// ktConfig is a valid config with the Kafka source on brokers, one sink
// "out" on the same cluster, the default DLQ in_dlq, short intervals and
// startup alignment off. Callers adjust it, then ktStart validates it.
func ktConfig(t testing.TB, brokers []string, executor string) *config.Config {
	t.Helper()
	cfg := config.Default()
	name := ktName("kt")
	cfg.Worker.Name = name
	cfg.Worker.ShutdownTimeout = config.Duration(20 * time.Second)
	cfg.UI.Enabled = false
	cfg.Metrics.Enabled = false
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

// ktValidate resolves and validates cfg like config.LoadFile does.
func ktValidate(t testing.TB, cfg *config.Config) {
	t.Helper()
	cfg.Resolve()
	if problems := cfg.Validate(); len(problems) > 0 {
		t.Fatalf("test config invalid:\n%s", strings.Join(problems, "\n"))
	}
}

// ktLogs is a concurrency-safe buffer behind a JSON slog handler.
type ktLogs struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *ktLogs) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *ktLogs) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Named returns every record logged with msg name, decoded.
func (l *ktLogs) Named(name string) []map[string]any {
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(l.String()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil && m["msg"] == name {
			out = append(out, m)
		}
	}
	return out
}

func (l *ktLogs) Logger() *slog.Logger {
	return slog.New(slog.NewJSONHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// ktWorker is an App running in a goroutine as main.go's serve runs it.
type ktWorker struct {
	t      testing.TB
	App    *App
	Reg    *prometheus.Registry
	Logs   *ktLogs
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
}

// ktNew builds the App without running it.
func ktNew(t testing.TB, cfg *config.Config) *ktWorker {
	t.Helper()
	return ktNewWith(t, cfg, Options{})
}

// ktNewWith is ktNew with Options (a custom handler).
func ktNewWith(t testing.TB, cfg *config.Config, opts Options) *ktWorker {
	t.Helper()
	ktValidate(t, cfg)
	w := &ktWorker{t: t, Reg: prometheus.NewRegistry(), Logs: &ktLogs{}}
	app, err := New(cfg, w.Logs.Logger(), w.Reg, opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	w.App = app
	t.Cleanup(func() {
		w.Stop()
		if t.Failed() {
			t.Logf("logs of worker %s:\n%s", cfg.Worker.Name, ktTail(w.Logs.String(), 80))
		}
	})
	return w
}

// ktStart builds the App and runs it.
func ktStart(t testing.TB, cfg *config.Config) *ktWorker {
	t.Helper()
	return ktStartWith(t, cfg, Options{})
}

// ktStartWith is ktStart with Options (a custom handler).
func ktStartWith(t testing.TB, cfg *config.Config, opts Options) *ktWorker {
	t.Helper()
	w := ktNewWith(t, cfg, opts)
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel, w.done = cancel, make(chan error, 1)
	go func() { w.done <- w.App.Run(ctx) }()
	return w
}

// Stop shuts the worker down like serve: intake stops (Run returns after
// the source drained and committed), then Drain and Close.
func (w *ktWorker) Stop() {
	w.once.Do(func() {
		if w.cancel != nil {
			w.cancel()
			select {
			case err := <-w.done:
				if err != nil {
					w.t.Errorf("Run = %v, want nil", err)
				}
			case <-time.After(ktWait):
				w.t.Errorf("Run did not return %s after its context ended", ktWait)
			}
		}
		w.App.Drain(10 * time.Second)
		w.App.Close()
	})
}

// Owned is the partitions the worker's consumer owns now.
func (w *ktWorker) Owned() []int32 {
	if w.App.source == nil {
		return nil
	}
	return w.App.source.assignedPartitions()
}

// InFlight is the number of polled messages not yet finished.
func (w *ktWorker) InFlight() int { return w.App.source.inflightCount() }

// Metric sums the samples of family name whose labels include want.
func (w *ktWorker) Metric(name string, want ...string) float64 {
	return ktMetric(w.t, w.Reg, name, want...)
}

// WaitJoined waits until the worker owns at least one partition.
func (w *ktWorker) WaitJoined() {
	w.t.Helper()
	ktEventually(w.t, ktWait, "worker owns partitions", func() (bool, string) {
		return len(w.Owned()) > 0, fmt.Sprint("owned ", w.Owned())
	})
}

// ktMetric sums the samples of family name whose labels include the
// label/value pairs in want.
func ktMetric(t testing.TB, reg *prometheus.Registry, name string, want ...string) float64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	var sum float64
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
	next:
		for _, m := range f.GetMetric() {
			for i := 0; i+1 < len(want); i += 2 {
				found := false
				for _, lp := range m.GetLabel() {
					if lp.GetName() == want[i] && lp.GetValue() == want[i+1] {
						found = true
					}
				}
				if !found {
					continue next
				}
			}
			switch f.GetType() {
			case dto.MetricType_GAUGE:
				sum += m.GetGauge().GetValue()
			case dto.MetricType_COUNTER:
				sum += m.GetCounter().GetValue()
			case dto.MetricType_UNTYPED:
				sum += m.GetUntyped().GetValue()
			}
		}
	}
	return sum
}

// ktEventually polls cond every 100ms until it holds or timeout passes;
// detail describes the last state for the failure message.
func ktEventually(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var detail string
	for {
		var ok bool
		ok, detail = cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still not true after %s (%s)", what, timeout, detail)
		}
		time.Sleep(100 * time.Millisecond)
	}
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
// topic's high watermark on every partition.
func ktWaitCommitted(t testing.TB, adm *kadm.Client, group string) {
	t.Helper()
	ktEventually(t, ktWait, "committed offsets reach the high watermarks", func() (bool, string) {
		ends, got := ktEnds(t, adm, ktIn), ktCommitted(t, adm, group)
		for p, end := range ends {
			if end > 0 && got[p] != end {
				return false, fmt.Sprintf("high watermarks %v, committed %v", ends, got)
			}
		}
		return true, ""
	})
}

// ktReadAll reads every record of topic up to the high watermarks taken
// when it starts, with a plain assign-only consumer.
func ktReadAll(t testing.TB, addrs []string, topic string) []*kgo.Record {
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
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.FetchMaxWait(100*time.Millisecond),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: parts}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), ktWait)
	defer cancel()
	next := map[int32]int64{}
	var out []*kgo.Record
	for {
		done := true
		for p, end := range ends {
			if next[p] < end {
				done = false
			}
		}
		if done {
			return out
		}
		f := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %s: reached %v of %v before the deadline", topic, next, ends)
		}
		f.EachError(func(_ string, p int32, err error) { t.Logf("read %s[%d]: %v", topic, p, err) })
		f.EachRecord(func(r *kgo.Record) {
			if r.Offset < ends[r.Partition] {
				out = append(out, r)
			}
			next[r.Partition] = r.Offset + 1
		})
	}
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
func ktCheckAllOut(t testing.TB, want []int, sink, dlq map[int]int) {
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
}

// ktCollect reads the sink topic (on sinkAddrs) and the DLQ (on addrs)
// and counts the records of each message id.
func ktCollect(t testing.TB, addrs, sinkAddrs []string) (sink, dlq map[int]int) {
	t.Helper()
	return ktCountIDs(ktReadAll(t, sinkAddrs, ktOut)), ktCountIDs(ktReadAll(t, addrs, ktDLQ))
}

// ktTail returns the last n lines of s.
func ktTail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
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
func (w *ktWorker) client() *kgo.Client {
	s := w.App.source
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cl
}

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
	s := w.App.source
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inflite > 0 {
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
	ktEventually(w.t, ktWait, "in-flight work finishes and is committed", func() (bool, string) {
		return w.Settled(), fmt.Sprintf("%d in flight", w.InFlight())
	})
}
