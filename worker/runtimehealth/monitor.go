package runtimehealth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Monitor is the runtime health monitor. Run owns its measuring state;
// Snapshot and the Prometheus collector read what Run last published and
// are safe for concurrent use.
type Monitor struct {
	o       Options
	running atomic.Bool

	// Owned by the goroutine in Run.
	reader   *reader
	lags     *lagRing
	reads    []reading // oldest first; reads[0] is the window's baseline
	episode  episode
	lastDump time.Time

	mu          sync.Mutex // guards the published state below
	current     *Sample
	recent      []Sample // oldest first
	stalls      []Stall  // oldest first
	lastBeat    time.Time
	lastLag     time.Duration
	inStall     bool
	stallsTotal uint64
	// Since the start, for the summaries' _count and _sum (the histograms'
	// as of the last sample).
	beatsTotal              uint64
	lagTotal                time.Duration
	pausesTotal, schedTotal histTotals
}

// New validates o and registers the metrics; it starts nothing.
func New(o Options) (*Monitor, error) {
	o = o.withDefaults()
	if err := o.validate(); err != nil {
		return nil, err
	}
	// The window plus one sample period: the most a baseline read lies back.
	beats := int((o.Window+o.EventEvery)/o.Interval) + 2
	m := &Monitor{o: o, reader: newReader(), lags: newLagRing(beats)}
	if o.Registerer != nil {
		if err := o.Registerer.Register(newCollector(m)); err != nil {
			return nil, fmt.Errorf("register runtime health metrics: %w", err)
		}
	}
	return m, nil
}

// Run beats and samples until ctx ends, then returns nil. It takes one
// sample at once, emitted like the periodic ones. Only one Run at a time.
func (m *Monitor) Run(ctx context.Context) error {
	if !m.running.CompareAndSwap(false, true) {
		return errors.New("run runtime health monitor: already running")
	}
	defer m.running.Store(false)
	m.sample(time.Now())
	samples := time.NewTicker(m.o.EventEvery)
	defer samples.Stop()
	due := time.Now().Add(m.o.Interval)
	beats := time.NewTimer(m.o.Interval)
	defer beats.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-beats.C:
			now := time.Now()
			m.beat(now, max(now.Sub(due), 0))
			// Due one interval after this beat woke: a long stall counts
			// once, and one that held this goroutine makes the next late.
			due = now.Add(m.o.Interval)
			beats.Reset(max(time.Until(due), 0))
		case <-samples.C:
			m.sample(time.Now())
		}
	}
}

// Snapshot is the body of GET /api/v1/debug/runtime. A nil Monitor (the
// monitor switched off) gives the disabled form.
func (m *Monitor) Snapshot() Snapshot {
	if m == nil {
		return Snapshot{Reason: "runtime_health.enabled is false"}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	s := Snapshot{
		Enabled:            true,
		Running:            m.running.Load(),
		IntervalMS:         ms(m.o.Interval),
		StallThresholdMS:   ms(m.o.StallThreshold),
		StallSampleSeconds: m.o.StallSampleEvery.Seconds(),
		EventEverySeconds:  m.o.EventEvery.Seconds(),
		WindowSeconds:      m.o.Window.Seconds(),
		LastLagMS:          ms(m.lastLag),
		InStall:            m.inStall,
		StallsTotal:        m.stallsTotal,
		Recent:             append([]Sample{}, m.recent...),
		Stalls:             append([]Stall{}, m.stalls...),
	}
	slices.Reverse(s.Recent)
	slices.Reverse(s.Stalls)
	if !m.lastBeat.IsZero() {
		s.LastBeatMS = m.lastBeat.UnixMilli()
	}
	if m.current != nil {
		c := *m.current
		s.Current = &c
	}
	return s
}

// Snapshot is the monitor's state for the API. Lists are newest first.
type Snapshot struct {
	Enabled            bool     `json:"enabled"`
	Reason             string   `json:"reason,omitempty"` // why it is disabled
	Running            bool     `json:"running"`
	IntervalMS         float64  `json:"interval_ms"`
	StallThresholdMS   float64  `json:"stall_threshold_ms"`
	StallSampleSeconds float64  `json:"stall_sample_every_seconds"`
	EventEverySeconds  float64  `json:"event_every_seconds"`
	WindowSeconds      float64  `json:"window_seconds"`
	LastBeatMS         int64    `json:"last_beat_ms"` // 0 before the first beat
	LastLagMS          float64  `json:"last_lag_ms"`
	InStall            bool     `json:"in_stall"`
	StallsTotal        uint64   `json:"stalls_total"`
	Current            *Sample  `json:"current"` // null before Run
	Recent             []Sample `json:"recent"`
	Stalls             []Stall  `json:"stalls"`
}

// MarshalJSON writes the disabled form as {"enabled":false,"reason":...}.
func (s Snapshot) MarshalJSON() ([]byte, error) {
	if !s.Enabled {
		return json.Marshal(struct {
			Enabled bool   `json:"enabled"`
			Reason  string `json:"reason"`
		}{false, s.Reason})
	}
	type plain Snapshot
	return json.Marshal(plain(s))
}

// beat records one heartbeat and drives the stall episodes.
func (m *Monitor) beat(now time.Time, lag time.Duration) {
	m.lags.add(now, lag)
	switch {
	case lag >= m.o.StallThreshold:
		m.lateBeat(now, lag)
	case m.episode.active && now.Sub(m.episode.lastLate) >= m.o.StallQuiet:
		m.endEpisode(now)
	}
	m.mu.Lock()
	m.lastBeat, m.lastLag, m.inStall = now, lag, m.episode.active
	m.beatsTotal++
	m.lagTotal += lag
	m.mu.Unlock()
}

// sample reads the runtime, publishes the result and emits it.
func (m *Monitor) sample(now time.Time) {
	c := m.reader.read(now)
	m.reads = append(m.reads, c)
	// Keep the newest read at or before the window start as the baseline.
	cut := now.Add(-m.o.Window)
	drop := 0
	for drop+1 < len(m.reads)-1 && !m.reads[drop+1].at.After(cut) {
		drop++
	}
	m.reads = slices.Delete(m.reads, 0, drop)
	base := m.reads[0]
	lags := m.lags.stats(base.at)
	pauses := histDelta(c.pauses, base.pauses)
	sched := histDelta(c.sched, base.sched)
	s := Sample{
		TSMS:              now.UnixMilli(),
		WindowSeconds:     round3(now.Sub(base.at).Seconds()),
		Beats:             lags.beats,
		LagP50MS:          ms(lags.p50),
		LagP99MS:          ms(lags.p99),
		LagMaxMS:          ms(lags.max),
		Goroutines:        c.goroutines,
		Gomaxprocs:        c.gomaxprocs,
		HeapLiveBytes:     c.heapLiveBytes,
		HeapTotalBytes:    c.heapTotalBytes,
		GCCycles:          c.gcCycles - min(c.gcCycles, base.gcCycles),
		GCPauses:          histTotal(pauses),
		GCPauseP50MS:      secMS(histQuantile(pauses, m.reader.pauseBuckets, 0.50)),
		GCPauseP99MS:      secMS(histQuantile(pauses, m.reader.pauseBuckets, 0.99)),
		SchedLatencyP50MS: secMS(histQuantile(sched, m.reader.schedBuckets, 0.50)),
		SchedLatencyP99MS: secMS(histQuantile(sched, m.reader.schedBuckets, 0.99)),
		OpenFDs:           openFDs(),
		RSSBytes:          rssBytes(),
	}
	if total := c.totalCPU - base.totalCPU; total > 0 {
		s.GCCPUFraction = min(max((c.gcCPU-base.gcCPU)/total, 0), 1)
	}
	if m.o.PoolQueue != nil {
		busy, size, waiting := m.o.PoolQueue()
		s.Pool = &PoolQueue{Busy: busy, Size: size, Waiting: waiting}
	}
	m.mu.Lock()
	s.StallsTotal = m.stallsTotal
	m.pausesTotal = totalsOf(c.pauses, m.reader.pauseBuckets)
	m.schedTotal = totalsOf(c.sched, m.reader.schedBuckets)
	m.current = &s
	m.recent = append(m.recent, s)
	if len(m.recent) > m.o.History {
		m.recent = slices.Delete(m.recent, 0, len(m.recent)-m.o.History)
	}
	m.mu.Unlock()
	m.o.Emit("sample", s)
}

// ms converts to milliseconds (nanosecond precision).
func ms(d time.Duration) float64 { return float64(d) / 1e6 }

// secMS converts seconds to milliseconds, rounded to the nanosecond.
func secMS(s float64) float64 { return math.Round(s*1e9) / 1e6 }

// round3 rounds to three decimals.
func round3(x float64) float64 { return math.Round(x*1e3) / 1e3 }
