package throughput

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// clock is a scripted time source.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

func (c *clock) set(t time.Time) { c.mu.Lock(); c.now = t; c.mu.Unlock() }

// unix is a time the test scripts in whole seconds.
func unix(s int64) time.Time { return time.Unix(s, 0) }

// TestScriptedObservations checks windows, totals, skip counts and metrics
// against numbers computed by hand for 10-second windows, a tracker made
// 3 s into a window and tasks with known costs and executor times.
func TestScriptedObservations(t *testing.T) {
	t.Parallel()
	const base = 1_700_000_000 // a multiple of 10
	clk := &clock{now: unix(base + 3)}
	reg := prometheus.NewRegistry()
	tr, err := New(Options{CostLabel: "cost", Window: 10 * time.Second, History: 3, Registerer: reg, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		at        int64
		labels    map[string]string
		wall      time.Duration
		cost, spd float64
		ok        bool
	}{
		{4, map[string]string{"cost": "2"}, 500 * time.Millisecond, 2, 4, true},
		{5, map[string]string{"cost": " 3.5 ", "x": "y"}, time.Second, 3.5, 3.5, true},
		{6, map[string]string{"cost": "abc"}, time.Second, 0, 0, false},
		{7, map[string]string{"other": "1"}, time.Second, 0, 0, false},
		{8, map[string]string{"cost": "-1"}, time.Second, 0, 0, false},
		{9, map[string]string{"cost": "NaN"}, time.Second, 0, 0, false},
		{12, map[string]string{"cost": "10"}, 2 * time.Second, 10, 5, true},
		{13, map[string]string{"cost": "1e13"}, time.Second, 0, 0, false},
		{36, map[string]string{"cost": "1"}, 0, 1, 0, true},
	}
	for _, s := range steps {
		clk.set(unix(base + s.at))
		cost, spd, ok := tr.Observe(s.labels, s.wall)
		if cost != s.cost || spd != s.spd || ok != s.ok {
			t.Errorf("Observe(%v, %s) at +%ds = %v, %v, %v; want %v, %v, %v",
				s.labels, s.wall, s.at, cost, spd, ok, s.cost, s.spd, s.ok)
		}
	}

	clk.set(unix(base + 38))
	snap := tr.Snapshot()
	w := func(start, end int64, secs float64, tasks int64, cost, exec float64, skipped int64) Window {
		v := Window{StartMS: (base + start) * 1000, EndMS: (base + end) * 1000, Seconds: secs, Tasks: tasks,
			Cost: cost, CostPerSecond: cost / secs, ExecutorSeconds: exec, Skipped: skipped}
		if exec > 0 {
			v.Speed = cost / exec
		}
		return v
	}
	checkWindow(t, "current", *snap.Current, w(30, 40, 8, 1, 1, 0, 0))
	wantWindows := []Window{
		w(20, 30, 10, 0, 0, 0, 0),   // no task
		w(10, 20, 10, 1, 10, 2, 1),  // 10 in 2 s of executor time; 1e13 skipped
		w(3, 10, 7, 2, 5.5, 1.5, 4), // the first window starts with the tracker
	}
	if len(snap.Windows) != len(wantWindows) {
		t.Fatalf("%d closed windows, want %d: %+v", len(snap.Windows), len(wantWindows), snap.Windows)
	}
	for i, want := range wantWindows {
		checkWindow(t, fmt.Sprintf("windows[%d]", i), snap.Windows[i], want)
	}
	checkWindow(t, "totals", *snap.Totals, w(3, 38, 35, 4, 16.5, 3.5, 5))
	for _, r := range Reasons() {
		if snap.Skipped[r] != 1 {
			t.Errorf("skipped[%s] = %d, want 1", r, snap.Skipped[r])
		}
	}
	if snap.CostLabel != "cost" || snap.WindowSeconds != 10 || snap.History != 3 || !snap.Enabled {
		t.Errorf("snapshot header = %+v", snap)
	}

	mfs := gather(t, reg)
	if got := mfs["svc_task_cost_total"].GetMetric()[0].GetCounter().GetValue(); got != 16.5 {
		t.Errorf("svc_task_cost_total = %v, want 16.5", got)
	}
	h := mfs["svc_task_speed_cost_per_second"].GetMetric()[0].GetHistogram()
	if h.GetSampleCount() != 3 || h.GetSampleSum() != 4+3.5+5 {
		t.Errorf("speed histogram count %d sum %v, want 3 and 12.5 (the tasks with executor time)",
			h.GetSampleCount(), h.GetSampleSum())
	}
	for _, m := range mfs["svc_task_cost_skipped_total"].GetMetric() {
		if m.GetCounter().GetValue() != 1 {
			t.Errorf("svc_task_cost_skipped_total%v = %v, want 1", m.GetLabel(), m.GetCounter().GetValue())
		}
	}
	if n := len(mfs["svc_task_cost_skipped_total"].GetMetric()); n != len(Reasons()) {
		t.Errorf("%d skip reasons exported, want %d", n, len(Reasons()))
	}

	// A long idle spell: only History empty windows are kept.
	clk.set(unix(base + 95))
	snap = tr.Snapshot()
	var starts []int64
	for _, w := range snap.Windows {
		starts = append(starts, w.StartMS/1000-base)
		if w.Tasks != 0 {
			t.Errorf("window %+v after the idle spell, want no tasks", w)
		}
	}
	if want := []int64{80, 70, 60}; !slices.Equal(starts, want) {
		t.Errorf("window starts after idling = %v, want %v", starts, want)
	}
	checkWindow(t, "current after idling", *snap.Current, Window{StartMS: (base + 90) * 1000, EndMS: (base + 100) * 1000, Seconds: 5})
}

func checkWindow(t *testing.T, name string, got, want Window) {
	t.Helper()
	near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-12*math.Max(1, math.Abs(b)) }
	if got.StartMS != want.StartMS || got.EndMS != want.EndMS || got.Tasks != want.Tasks || got.Skipped != want.Skipped ||
		!near(got.Seconds, want.Seconds) || !near(got.Cost, want.Cost) || !near(got.CostPerSecond, want.CostPerSecond) ||
		!near(got.ExecutorSeconds, want.ExecutorSeconds) || !near(got.Speed, want.Speed) {
		t.Errorf("%s = %+v\nwant %+v", name, got, want)
	}
}

func gather(t *testing.T, reg *prometheus.Registry) map[string]*dto.MetricFamily {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, mf := range mfs {
		out[mf.GetName()] = mf
	}
	return out
}

func TestDisabledTracker(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	tr, err := New(Options{Registerer: reg, Window: -1})
	if err != nil {
		t.Fatal(err)
	}
	if tr.Enabled() {
		t.Error("Enabled() = true without a cost label")
	}
	if c, s, ok := tr.Observe(map[string]string{"cost": "5"}, time.Second); c != 0 || s != 0 || ok {
		t.Errorf("Observe on a disabled tracker = %v, %v, %v; want zeros", c, s, ok)
	}
	for name, snap := range map[string]Snapshot{"disabled": tr.Snapshot(), "nil": (*Tracker)(nil).Snapshot()} {
		b, err := json.Marshal(snap)
		if err != nil {
			t.Fatal(err)
		}
		if want := `{"enabled":false,"reason":"throughput.cost_label is not set"}`; string(b) != want {
			t.Errorf("%s snapshot = %s, want %s", name, b, want)
		}
	}
	if mfs := gather(t, reg); len(mfs) != 0 {
		t.Errorf("disabled tracker registered %d families, want none", len(mfs))
	}
}

func TestEnabledSnapshotJSON(t *testing.T) {
	t.Parallel()
	clk := &clock{now: unix(1_699_999_980)} // a multiple of 60
	tr, err := New(Options{CostLabel: "cost", Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(tr.Snapshot())
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"enabled":true`, `"cost_label":"cost"`, `"window_seconds":60`, `"history":60`,
		`"current":{"start_ms":1699999980000,"end_ms":1700000040000,"seconds":0,"tasks":0`, `"windows":[]`,
		`"totals":{`, `"skipped":{"missing":0,"negative":0,"not_finite":0,"not_numeric":0,"too_large":0}`} {
		if !strings.Contains(string(b), key) {
			t.Errorf("snapshot JSON lacks %s: %s", key, b)
		}
	}
}

func TestSkipLoggedOncePerReason(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	tr, err := New(Options{CostLabel: "cost", Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"abc", "x", "-2", "abc"} {
		tr.Observe(map[string]string{"cost": v}, time.Second)
	}
	tr.Observe(map[string]string{"cost": strings.Repeat("é", 100)}, time.Second)
	if n := strings.Count(logs.String(), `"msg":"task_cost_label_skipped"`); n != 2 {
		t.Errorf("task_cost_label_skipped logged %d times, want 2 (not_numeric, negative):\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), `"reason":"not_numeric","value":"abc"`) {
		t.Errorf("log lacks the first not_numeric value:\n%s", logs.String())
	}
	if got := tr.Snapshot().Skipped[ReasonNotNumeric]; got != 4 {
		t.Errorf("skipped not_numeric = %d, want 4", got)
	}
}

func TestParseCost(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		value   string
		present bool
		cost    float64
		reason  string
	}{
		{"", false, 0, ReasonMissing},
		{"", true, 0, ReasonNotNumeric},
		{"  ", true, 0, ReasonNotNumeric},
		{"12", true, 12, ""},
		{" 0.25\n", true, 0.25, ""},
		{"0", true, 0, ""},
		{"-0", true, 0, ""},
		{"1e12", true, 1e12, ""},
		{"1.5e12", true, 0, ReasonTooLarge},
		{"1e400", true, 0, ReasonTooLarge},
		{"-1e400", true, 0, ReasonNegative},
		{"-0.001", true, 0, ReasonNegative},
		{"NaN", true, 0, ReasonNotFinite},
		{"+Inf", true, 0, ReasonNotFinite},
		{"-infinity", true, 0, ReasonNotFinite},
		{"12 units", true, 0, ReasonNotNumeric},
		{"0x10", true, 0, ReasonNotNumeric}, // hex needs a p exponent
		{strings.Repeat("1", 65), true, 0, ReasonNotNumeric},
	} {
		cost, reason := parseCost(tc.value, tc.present)
		if cost != tc.cost || reason != tc.reason || math.Signbit(cost) {
			t.Errorf("parseCost(%q, %v) = %v, %q; want %v, %q", tc.value, tc.present, cost, reason, tc.cost, tc.reason)
		}
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		o    Options
		key  string
	}{
		{"window too short", Options{CostLabel: "c", Window: 500 * time.Millisecond}, "throughput.window"},
		{"negative window", Options{CostLabel: "c", Window: -time.Second}, "throughput.window"},
		{"window too long", Options{CostLabel: "c", Window: 48 * time.Hour}, "throughput.window"},
		{"negative history", Options{CostLabel: "c", History: -1}, "History"},
		{"history too large", Options{CostLabel: "c", History: 20000}, "History"},
		{"label too long", Options{CostLabel: strings.Repeat("c", 300)}, "throughput.cost_label"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if _, err := New(tc.o); err == nil || !strings.Contains(err.Error(), tc.key) {
				t.Errorf("New = %v, want an error naming %s", err, tc.key)
			}
		})
	}
	reg := prometheus.NewRegistry()
	if _, err := New(Options{CostLabel: "c", Registerer: reg}); err != nil {
		t.Fatal(err)
	}
	if _, err := New(Options{CostLabel: "c", Registerer: reg}); err == nil {
		t.Error("second tracker on one registry = nil error, want a registration error")
	}
}

// TestConcurrentObserve runs observers and readers together (for -race)
// and checks no task is lost.
func TestConcurrentObserve(t *testing.T) {
	t.Parallel()
	tr, err := New(Options{CostLabel: "cost", Window: time.Second, History: 5, Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 500 {
				tr.Observe(map[string]string{"cost": "0.5"}, time.Millisecond)
				tr.Observe(nil, time.Millisecond)
			}
		})
	}
	wg.Go(func() {
		for range 100 {
			_ = tr.Snapshot()
		}
	})
	wg.Wait()
	s := tr.Snapshot()
	if s.Totals.Tasks != 4000 || s.Totals.Cost != 2000 || s.Skipped[ReasonMissing] != 4000 {
		t.Errorf("totals = %+v, skipped %v; want 4000 tasks, cost 2000, 4000 missing", s.Totals, s.Skipped)
	}
}

func FuzzParseCost(f *testing.F) {
	for _, s := range []string{"1", "-1", "NaN", "1e400", "0x1p-2", " 3 ", "", "1_000"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		cost, reason := parseCost(s, true)
		switch {
		case reason == "" && (math.IsNaN(cost) || cost < 0 || cost > MaxCost || math.Signbit(cost)):
			t.Errorf("parseCost(%q) = %v accepted", s, cost)
		case reason != "" && cost != 0:
			t.Errorf("parseCost(%q) = %v with reason %q", s, cost, reason)
		case reason != "" && !slices.Contains(Reasons(), reason):
			t.Errorf("parseCost(%q) reason %q not in Reasons", s, reason)
		}
	})
}
