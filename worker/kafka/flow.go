package kafka

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"time"

	"svc/worker/config"
	"svc/worker/model"

	"github.com/prometheus/client_golang/prometheus"
)

// Consume pause errors; the UI server maps them to 403, 503 and 400.
var (
	ErrPauseDisabled      = errors.New("ui.consume_pause.enabled is false")
	ErrConsumerNotRunning = errors.New("the Kafka consumer is not running")
)

// DurationError is a consume-pause duration outside 1-3600 seconds.
type DurationError struct{ Seconds int64 }

func (e *DurationError) Error() string {
	return fmt.Sprintf("duration_seconds must be an integer from 1 to 3600, got %d", e.Seconds)
}

// PauseState is the consume pause state object.
type PauseState struct {
	Enabled          bool  `json:"enabled"`
	DurationsSeconds []int `json:"durations_seconds"`
	Active           bool  `json:"active"`
	ResumeAtMS       int64 `json:"resume_at_ms"`
	RequestedSeconds int   `json:"requested_seconds"`
}

// pauseTarget is what flow control drives: fetching of the whole topic, or
// of single partitions.
type pauseTarget interface {
	pauseIntake()
	resumeIntake()
	pausePartitions(ps []int32)
	resumePartitions(ps []int32)
	assignedPartitions() []int32
	consuming() bool
}

// partHold is why one partition's fetching is paused on its own.
type partHold struct {
	saturated bool // too much of its work waits (backpressure of one partition)
	stalled   bool // a DLQ send failed under "stall": until restart or revoke
}

func (h partHold) paused() bool { return h.saturated || h.stalled }

// flowControl is the one place that pauses and resumes fetching. The
// operator's consume pause, backpressure and the executor hold pause the
// topic; a partition's own backpressure and its stall (until restart or
// revoke) pause that partition. Its lock comes after the source's.
type flowControl struct {
	mu           sync.Mutex
	enabled      bool
	presets      []int
	target       pauseTarget
	operator     bool // the operator's timed consume pause holds intake
	resumeAt     time.Time
	requested    int
	timer        *time.Timer
	gen          int // invalidates a stale deadline timer
	backpressure bool
	executor     bool // the executor is unavailable: nothing more is fetched
	applied      bool // topic fetching currently paused
	parts        map[int32]partHold
	onRelease    func() // called when the operator's pause ends (outside mu)
	log          *slog.Logger
	events       *model.Events
	pauseGauge   prometheus.Gauge
	bpGauge      prometheus.Gauge
	execGauge    prometheus.Gauge
	now          func() time.Time
}

func newFlowControl(cfg *config.Config, reg prometheus.Registerer, log *slog.Logger, events *model.Events) *flowControl {
	f := &flowControl{
		enabled: cfg.UI.ConsumePause.Enabled, presets: cfg.UI.ConsumePause.DurationsSeconds, log: log, now: time.Now, events: events,
		parts: map[int32]partHold{},
		pauseGauge: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "svc_consume_pause_active", Help: "1 while an operator's consume pause holds intake.",
		}),
		bpGauge: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "svc_backpressure_active", Help: "1 while too much polled work waits to run (6 × max(pipeline.max_in_flight, sources.kafka.max_poll_records) messages or 64 MiB) and all fetching is paused.",
		}),
		execGauge: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "svc_executor_hold_active", Help: "1 while the executor is unavailable and all fetching of the source topic is paused.",
		}),
	}
	reg.MustRegister(f.pauseGauge, f.bpGauge, f.execGauge)
	return f
}

// State returns the state object.
func (f *flowControl) State() PauseState {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := PauseState{Enabled: f.enabled, DurationsSeconds: f.presets, Active: f.operator}
	if st.DurationsSeconds == nil {
		st.DurationsSeconds = []int{}
	}
	if f.operator {
		st.ResumeAtMS, st.RequestedSeconds = f.resumeAt.UnixMilli(), f.requested
	}
	return st
}

// lockRunning takes f.mu when the consume pause may change now; else it
// returns why not.
func (f *flowControl) lockRunning() error {
	if !f.enabled {
		return ErrPauseDisabled
	}
	f.mu.Lock()
	if f.target == nil || !f.target.consuming() {
		f.mu.Unlock()
		return ErrConsumerNotRunning
	}
	return nil
}

// Pause starts or extends the operator's pause: the deadline becomes now +
// seconds (a re-pause moves it).
func (f *flowControl) Pause(seconds int64) (PauseState, error) {
	if f.enabled && (seconds < 1 || seconds > 3600) {
		return f.State(), &DurationError{Seconds: seconds}
	}
	if err := f.lockRunning(); err != nil {
		return f.State(), err
	}
	d := time.Duration(seconds) * time.Second
	wasActive := f.operator
	f.operator, f.requested, f.resumeAt = true, int(seconds), f.now().Add(d)
	f.gen++
	gen := f.gen
	if f.timer != nil {
		f.timer.Stop()
	}
	f.timer = time.AfterFunc(d, func() { f.deadline(gen) })
	f.applyLocked()
	f.pauseGauge.Set(1)
	target, resumeAt := f.target, f.resumeAt
	f.mu.Unlock()
	partitions := target.assignedPartitions()
	f.events.State("consume_pause", map[string]any{"active": true, "requested_seconds": seconds, "resume_at_ms": resumeAt.UnixMilli()})
	if wasActive {
		f.log.Info("consume_pause_extended", "duration_seconds", seconds, "deadline_ms", resumeAt.UnixMilli())
	} else {
		f.log.Info("consume_pause_started", "duration_seconds", seconds, "deadline_ms", resumeAt.UnixMilli(),
			"deadline", resumeAt.UTC().Format(time.RFC3339), "partitions", partitions)
	}
	return f.State(), nil
}

// Resume ends the operator's pause; idempotent. Partitions stay paused while
// backpressure still holds them.
func (f *flowControl) Resume() (PauseState, error) {
	if err := f.lockRunning(); err != nil {
		return f.State(), err
	}
	was := f.endLocked()
	f.mu.Unlock()
	if was {
		f.events.State("consume_pause", map[string]any{"active": false, "by": "operator"})
		f.log.Info("consume_pause_ended", "by", "operator")
		f.released()
	}
	return f.State(), nil
}

func (f *flowControl) deadline(gen int) {
	f.mu.Lock()
	ended := gen == f.gen && f.endLocked()
	f.mu.Unlock()
	if !ended {
		return
	}
	f.events.State("consume_pause", map[string]any{"active": false, "by": "deadline"})
	f.log.Info("consume_pause_deadline_reached")
	f.released()
}

func (f *flowControl) released() {
	if f.onRelease != nil {
		f.onRelease()
	}
}

// commitsHeld reports whether the operator's pause is active: nothing
// commits then.
func (f *flowControl) commitsHeld() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.operator
}

// endLocked clears the operator's pause; it reports whether one was active.
func (f *flowControl) endLocked() bool {
	if !f.operator {
		return false
	}
	f.operator, f.requested, f.resumeAt = false, 0, time.Time{}
	f.gen++
	if f.timer != nil {
		f.timer.Stop()
		f.timer = nil
	}
	f.pauseGauge.Set(0)
	f.applyLocked()
	return true
}

func (f *flowControl) setBackpressure(on bool) { f.setTopicHold(&f.backpressure, f.bpGauge, on) }

func (f *flowControl) setExecutorHold(on bool) { f.setTopicHold(&f.executor, f.execGauge, on) }

// setTopicHold sets one topic-wide hold and its gauge and applies them.
func (f *flowControl) setTopicHold(hold *bool, gauge prometheus.Gauge, on bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if *hold == on {
		return
	}
	*hold = on
	gauge.Set(flag(on))
	f.applyLocked()
}

// applyLocked pauses the topic while any topic-wide hold holds it.
func (f *flowControl) applyLocked() {
	want := f.operator || f.backpressure || f.executor
	if f.target == nil || want == f.applied {
		return
	}
	f.applied = want
	if want {
		f.target.pauseIntake()
	} else {
		f.target.resumeIntake()
	}
}

// setSaturated pauses (on) or resumes one partition's fetching for its
// waiting work; a stall keeps it paused.
func (f *flowControl) setSaturated(p int32, on bool) {
	f.holdPart(p, func(h *partHold) { h.saturated = on })
}

// stall pauses one partition until forget (revoke or restart).
func (f *flowControl) stall(p int32) {
	f.holdPart(p, func(h *partHold) { h.stalled = true })
}

// holdPart changes partition p's holds and applies them.
func (f *flowControl) holdPart(p int32, change func(*partHold)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	h := f.parts[p]
	was := h.paused()
	change(&h)
	if h.paused() {
		f.parts[p] = h
	} else {
		delete(f.parts, p)
	}
	if f.target == nil || was == h.paused() {
		return
	}
	if h.paused() {
		f.target.pausePartitions([]int32{p})
	} else {
		f.target.resumePartitions([]int32{p})
	}
}

// forget lifts the own pauses of partitions that left this worker.
func (f *flowControl) forget(ps []int32) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var resume []int32
	for _, p := range ps {
		if h, ok := f.parts[p]; ok {
			delete(f.parts, p)
			if h.paused() {
				resume = append(resume, p)
			}
		}
	}
	if f.target != nil && len(resume) > 0 {
		f.target.resumePartitions(resume)
	}
}

// fetchPaused reports whether the topic's fetching is paused and which
// partitions are paused on their own.
func (f *flowControl) fetchPaused() (topic bool, parts map[int32]partHold) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.applied, maps.Clone(f.parts)
}

// attach connects the running consumer; detach disconnects it on stop.
func (f *flowControl) attach(t pauseTarget) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.target, f.applied = t, false
	f.applyLocked()
	var ps []int32
	for p, h := range f.parts {
		if h.paused() {
			ps = append(ps, p)
		}
	}
	if len(ps) > 0 {
		t.pausePartitions(ps)
	}
}

func (f *flowControl) detach() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.target = nil
}
