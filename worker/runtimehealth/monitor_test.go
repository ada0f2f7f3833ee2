package runtimehealth

import (
	"context"
	"encoding/json"
	"log/slog"
	"math"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"svc/worker/workertest/wait"
)

// TestSampleGaugesAreSane runs the monitor while the test forces GC cycles
// and checks the second sample (the first with a window), the metrics and
// the API snapshot against each other.
func TestSampleGaugesAreSane(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	events := make(chan Sample, 16)
	m, err := New(Options{
		Interval:   10 * time.Millisecond,
		EventEvery: time.Second,
		Window:     time.Second,
		Registerer: reg,
		PoolQueue:  func() (int, int, int) { return 2, 4, 7 },
		Emit: func(kind string, payload any) {
			if kind == "sample" {
				select {
				case events <- payload.(Sample):
				default:
				}
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()

	first := <-events
	if first.WindowSeconds != 0 || first.Beats != 0 {
		t.Errorf("first sample window_seconds = %v, beats = %d, want 0, 0", first.WindowSeconds, first.Beats)
	}
	var s Sample
	for s.TSMS == 0 {
		select {
		case s = <-events:
		case <-time.After(20 * time.Millisecond):
			runtime.GC()
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v, want nil when ctx ends", err)
	}

	checks := []struct {
		name string
		ok   bool
	}{
		{"window_seconds > 0", s.WindowSeconds > 0},
		{"beats > 0", s.Beats > 0},
		{"0 <= lag p50 <= p99 <= max", 0 <= s.LagP50MS && s.LagP50MS <= s.LagP99MS && s.LagP99MS <= s.LagMaxMS},
		{"goroutines >= 2", s.Goroutines >= 2},
		{"gomaxprocs", s.Gomaxprocs == int64(runtime.GOMAXPROCS(0))},
		{"0 < heap live <= heap total", 0 < s.HeapLiveBytes && s.HeapLiveBytes <= s.HeapTotalBytes},
		{"gc cycles > 0", s.GCCycles > 0},
		{"gc pauses >= gc cycles", s.GCPauses >= s.GCCycles},
		{"0 < gc pause p50 <= p99 < 1s", 0 < s.GCPauseP50MS && s.GCPauseP50MS <= s.GCPauseP99MS && s.GCPauseP99MS < 1000},
		{"0 < gc cpu fraction <= 1", 0 < s.GCCPUFraction && s.GCCPUFraction <= 1},
		{"0 < sched latency p50 <= p99", 0 < s.SchedLatencyP50MS && s.SchedLatencyP50MS <= s.SchedLatencyP99MS},
		{"open fds > 0 on linux", runtime.GOOS != "linux" || s.OpenFDs > 0},
		{"rss > heap live on linux", runtime.GOOS != "linux" || s.RSSBytes > int64(s.HeapLiveBytes)},
		{"pool queue", s.Pool != nil && *s.Pool == PoolQueue{Busy: 2, Size: 4, Waiting: 7}},
	}
	for _, c := range checks {
		if !c.ok {
			t.Errorf("%s: false for sample %+v", c.name, s)
		}
	}

	snap := m.Snapshot()
	if snap.Running || snap.Current == nil || len(snap.Recent) < 2 || snap.Recent[0] != *snap.Current {
		t.Fatalf("Snapshot after Run = running %v, current %v, %d recent; want stopped, the newest sample first",
			snap.Running, snap.Current, len(snap.Recent))
	}
	cur := snap.Current
	for name, want := range map[string]float64{
		"svc_runtime_goroutines":            float64(cur.Goroutines),
		"svc_runtime_heap_live_bytes":       float64(cur.HeapLiveBytes),
		"svc_runtime_heap_total_bytes":      float64(cur.HeapTotalBytes),
		"svc_runtime_gc_cpu_fraction":       cur.GCCPUFraction,
		"svc_runtime_open_fds":              float64(cur.OpenFDs),
		"svc_runtime_resident_memory_bytes": float64(cur.RSSBytes),
		"svc_runtime_stalls_total":          float64(cur.StallsTotal),
	} {
		if got := gatherOne(t, reg, name); got != want {
			t.Errorf("%s = %v, want %v (the snapshot's value)", name, got, want)
		}
	}
	for _, q := range []struct {
		name     string
		quantile float64
		ms       float64
	}{
		{"svc_runtime_scheduler_lag_seconds", 0.5, cur.LagP50MS},
		{"svc_runtime_scheduler_lag_seconds", 0.99, cur.LagP99MS},
		{"svc_runtime_scheduler_lag_seconds", 1, cur.LagMaxMS},
		{"svc_runtime_gc_pause_seconds", 0.5, cur.GCPauseP50MS},
		{"svc_runtime_gc_pause_seconds", 0.99, cur.GCPauseP99MS},
		{"svc_runtime_sched_latency_seconds", 0.5, cur.SchedLatencyP50MS},
		{"svc_runtime_sched_latency_seconds", 0.99, cur.SchedLatencyP99MS},
	} {
		sum := gatherSummary(t, reg, q.name)
		if got, ok := sum.quantiles[q.quantile]; !ok || math.Abs(got-q.ms/1e3) > 1e-12 {
			t.Errorf("%s{quantile=\"%v\"} = %v (exported %v), want %v", q.name, q.quantile, got, ok, q.ms/1e3)
		}
	}
	// Counts and sums run since the start: at least the window's, and a
	// mean inside the window's range.
	if lag := gatherSummary(t, reg, "svc_runtime_scheduler_lag_seconds"); lag.count < uint64(cur.Beats) || lag.sum < 0 || lag.sum > float64(lag.count)*cur.LagMaxMS/1e3+1e-9 {
		t.Errorf("svc_runtime_scheduler_lag_seconds count %d sum %v, want at least the window's %d beats and a mean up to the max %v ms", lag.count, lag.sum, cur.Beats, cur.LagMaxMS)
	}
	if gc := gatherSummary(t, reg, "svc_runtime_gc_pause_seconds"); gc.count < cur.GCPauses || gc.sum <= 0 {
		t.Errorf("svc_runtime_gc_pause_seconds count %d sum %v, want at least the window's %d pauses and a positive sum", gc.count, gc.sum, cur.GCPauses)
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) != 0 {
		t.Errorf("promlint on the runtime metrics = %v, %v; want no problem", problems, err)
	}

	b, err := json.Marshal(snap)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"enabled":true`, `"current":{`, `"recent":[{`, `"stalls":[`, `"lag_p99_ms":`, `"pool":{"busy":2`} {
		if !strings.Contains(string(b), key) {
			t.Errorf("snapshot JSON lacks %s: %s", key, b)
		}
	}
}

// gatherOne returns the value of the named unlabelled gauge or counter;
// it fails the test when the series is missing.
func gatherOne(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	m := gatherMetric(t, reg, name)
	if m.GetCounter() != nil {
		return m.GetCounter().GetValue()
	}
	return m.GetGauge().GetValue()
}

// summary is an exported summary: quantile → value, count, sum.
type summary struct {
	quantiles map[float64]float64
	count     uint64
	sum       float64
}

// gatherSummary returns the named summary; it fails the test when the
// series is missing or not a summary.
func gatherSummary(t *testing.T, reg *prometheus.Registry, name string) summary {
	t.Helper()
	s := gatherMetric(t, reg, name).GetSummary()
	if s == nil {
		t.Fatalf("metric %s is not a summary", name)
	}
	out := summary{quantiles: map[float64]float64{}, count: s.GetSampleCount(), sum: s.GetSampleSum()}
	for _, q := range s.GetQuantile() {
		out.quantiles[q.GetQuantile()] = q.GetValue()
	}
	return out
}

func gatherMetric(t *testing.T, reg *prometheus.Registry, name string) *dto.Metric {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0]
		}
	}
	t.Fatalf("metric %s not exported as one series", name)
	return nil
}

func TestRunIsExclusiveAndStops(t *testing.T) {
	t.Parallel()
	m, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	wait.For(t, wait.Long, "the monitor to run", func() (bool, string) { return m.Snapshot().Running, "" })
	if err := m.Run(ctx); err == nil || !strings.Contains(err.Error(), "already running") {
		t.Errorf("second Run = %v, want an already running error", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run = %v, want nil when ctx ends", err)
	}
	if m.Snapshot().Running {
		t.Error("Snapshot().Running = true after Run returned")
	}
}

func TestDisabledSnapshot(t *testing.T) {
	t.Parallel()
	var m *Monitor
	b, err := json.Marshal(m.Snapshot())
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"enabled":false,"reason":"runtime_health.enabled is false"}`; string(b) != want {
		t.Errorf("nil monitor snapshot = %s, want %s", b, want)
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		o     Options
		field string
	}{
		{"negative interval", Options{Interval: -time.Second}, "Interval"},
		{"interval too short", Options{Interval: time.Millisecond}, "Interval"},
		{"threshold too long", Options{StallThreshold: time.Hour}, "StallThreshold"},
		{"negative quiet", Options{StallQuiet: -1}, "StallQuiet"},
		{"sample every too short", Options{StallSampleEvery: time.Millisecond}, "StallSampleEvery"},
		{"event every too short", Options{EventEvery: 100 * time.Millisecond}, "EventEvery"},
		{"window under event every", Options{EventEvery: 20 * time.Second, Window: 10 * time.Second}, "Window"},
		{"window too many reads", Options{EventEvery: time.Second, Window: time.Hour}, "Window"},
		{"window too many beats", Options{Interval: 10 * time.Millisecond, EventEvery: 10 * time.Second, Window: time.Hour}, "Window"},
		{"history too large", Options{History: 5000}, "History"},
		{"negative history", Options{History: -1}, "History"},
		{"dump too large", Options{DumpBytes: 64 << 20}, "DumpBytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := New(tc.o)
			if err == nil || !strings.Contains(err.Error(), tc.field+" must") {
				t.Errorf("New(%+v) = %v, want an error naming %s", tc.o, err, tc.field)
			}
		})
	}
}

func TestNewRegistersOnce(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	if _, err := New(Options{Registerer: reg}); err != nil {
		t.Fatal(err)
	}
	if _, err := New(Options{Registerer: reg}); err == nil {
		t.Error("second New on one registry = nil error, want a registration error")
	}
	// Before the first sample only the stall counter is exported.
	mfs, err := reg.Gather()
	if err != nil || len(mfs) != 1 || mfs[0].GetName() != "svc_runtime_stalls_total" {
		t.Errorf("families before Run = %v (%v), want svc_runtime_stalls_total only", mfs, err)
	}
}

// TestStallHoldingTheMonitorShowsOnTheNextBeat: a stall that holds the
// monitor while it handles a late beat (here its log write takes 300 ms)
// makes the next beat late too, so the episode counts it; the next beat is
// not scheduled from when the handling ended.
func TestStallHoldingTheMonitorShowsOnTheNextBeat(t *testing.T) {
	t.Parallel()
	const hold = 300 * time.Millisecond
	ended := make(chan StallEnd, 1)
	var samples atomic.Int32
	m, err := New(Options{
		Interval:       10 * time.Millisecond,
		StallThreshold: 100 * time.Millisecond,
		StallQuiet:     500 * time.Millisecond,
		EventEvery:     time.Second,
		Window:         time.Second,
		Logger:         slog.New(holdingHandler{slog.DiscardHandler, "runtime_stall_detected", hold}),
		Emit: func(kind string, payload any) {
			switch kind {
			case "sample":
				if samples.Add(1) == 2 { // the first sample after Run began: a stall of the monitor
					time.Sleep(hold)
				}
			case "stall_ended":
				select {
				case ended <- payload.(StallEnd):
				default:
				}
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() { _ = m.Run(ctx) }()
	select {
	case e := <-ended:
		if e.LateBeats < 2 || e.DurationMS < 2*hold.Seconds()*1000*0.9 {
			t.Errorf("stall_ended = %+v, want 2 or more late beats over about %v (the stall that held the log write counted)", e, 2*hold)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no stall_ended event within 30s")
	}
}

// holdingHandler blocks for hold on records with message msg.
type holdingHandler struct {
	slog.Handler
	msg  string
	hold time.Duration
}

func (holdingHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h holdingHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == h.msg {
		time.Sleep(h.hold)
	}
	return h.Handler.Handle(ctx, r)
}
