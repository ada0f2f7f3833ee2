// Package throughput turns a numeric task label into a task cost: per-task
// speed (cost per second of executor wall time) and windowed throughput
// (cost per second of real time over fixed windows).
package throughput

import (
	"fmt"
	"log/slog"
	"sync"
	"time"

	"svc/worker/model"

	"github.com/prometheus/client_golang/prometheus"
)

// Defaults and bounds of Options.
const (
	DefaultWindow  = 60 * time.Second
	DefaultHistory = 60
	minWindow      = time.Second
	maxWindow      = 24 * time.Hour
	maxHistory     = 10000
	maxLabelName   = 256
)

// Options configure a Tracker.
type Options struct {
	// CostLabel is throughput.cost_label; empty gives a disabled tracker.
	CostLabel string
	// Window is throughput.window (60s; 1s-24h). Windows are aligned to
	// multiples of Window since the Unix epoch, so the windows of all
	// workers line up.
	Window time.Duration
	// History is how many closed windows Snapshot returns (60; 1-10000).
	History int
	// Registerer receives the svc_task_cost_* metrics; nil registers none.
	Registerer prometheus.Registerer
	// Logger gets task_cost_label_skipped once per reason; nil discards.
	Logger *slog.Logger
	// Now is the clock (time.Now when nil); tests script it.
	Now func() time.Time
}

// Tracker accounts task costs. Observe and Snapshot are safe for
// concurrent use; Observe holds a mutex for a few additions.
type Tracker struct {
	o       Options
	enabled bool
	m       *metrics

	mu      sync.Mutex
	cur     window
	closed  []window // oldest first, at most History
	totals  window   // start is when the tracker was made
	skipped map[string]int64
	warned  map[string]bool
}

// New validates o and, when o.CostLabel is set, registers the metrics;
// without one it returns a disabled tracker.
func New(o Options) (*Tracker, error) {
	if o.CostLabel == "" {
		return &Tracker{o: o}, nil
	}
	if o.Window == 0 {
		o.Window = DefaultWindow
	}
	if o.History == 0 {
		o.History = DefaultHistory
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	switch {
	case len(o.CostLabel) > maxLabelName:
		return nil, fmt.Errorf("throughput.cost_label: longer than %d bytes", maxLabelName)
	case o.Window < minWindow || o.Window > maxWindow:
		return nil, fmt.Errorf("throughput.window: must be from %s to %s (got %s)", minWindow, maxWindow, o.Window)
	case o.History < 1 || o.History > maxHistory:
		return nil, fmt.Errorf("throughput options: History must be from 1 to %d (got %d)", maxHistory, o.History)
	}
	m, err := newMetrics(o.Registerer)
	if err != nil {
		return nil, err
	}
	t := &Tracker{o: o, enabled: true, m: m, skipped: map[string]int64{}, warned: map[string]bool{}}
	for _, r := range Reasons() {
		t.skipped[r] = 0
	}
	now := o.Now()
	t.cur = window{start: now, end: t.windowEnd(now)}
	t.totals = window{start: now}
	return t, nil
}

// Enabled reports whether a cost label is configured.
func (t *Tracker) Enabled() bool { return t.enabled }

// Observe accounts one finished task, of executor wall time wall. A cost
// label holding a finite number from 0 to MaxCost gives ok, the cost, and
// speed = cost / wall seconds (0 when wall is not positive); otherwise the
// task is counted under its skip reason.
func (t *Tracker) Observe(labels map[string]string, wall time.Duration) (cost, speed float64, ok bool) {
	if !t.enabled {
		return 0, 0, false
	}
	value, present := labels[t.o.CostLabel]
	cost, reason := parseCost(value, present)
	now := t.o.Now()
	t.mu.Lock()
	t.roll(now)
	if reason != "" {
		t.skipped[reason]++
		t.cur.skipped++
		t.totals.skipped++
		first := !t.warned[reason]
		t.warned[reason] = true
		t.mu.Unlock()
		t.m.skipped.WithLabelValues(reason).Inc()
		if first {
			t.o.Logger.Warn("task_cost_label_skipped", "label", t.o.CostLabel, "reason", reason,
				"value", model.Truncate(value, 64))
		}
		return 0, 0, false
	}
	wall = max(wall, 0)
	if wall > 0 {
		speed = cost / wall.Seconds()
	}
	t.cur.add(cost, wall)
	t.totals.add(cost, wall)
	t.mu.Unlock()
	t.m.cost.Add(cost)
	if wall > 0 {
		t.m.speed.Observe(speed)
	}
	return cost, speed, true
}
