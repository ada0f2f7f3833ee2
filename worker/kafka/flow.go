package kafka

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"svc/worker"
	"svc/worker/config"

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

// pauseTarget is what flow control drives: pausing or resuming fetching of
// every assigned partition that is not stall-paused.
type pauseTarget interface {
	pauseIntake()
	resumeIntake()
	assignedPartitions() []int32
	running() bool
}

// flowControl arbitrates the two actors that pause intake, the operator's
// timed consume pause and backpressure, with this precedence:
// intake runs only while neither holds it; stall-paused partitions are
// outside its reach (the target never touches them). Safe for concurrent use.
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
	applied      bool // intake currently paused
	log          *slog.Logger
	events       *worker.Events
	pauseGauge   prometheus.Gauge
	bpGauge      prometheus.Gauge
	now          func() time.Time
}

func newFlowControl(cfg *config.Config, reg prometheus.Registerer, log *slog.Logger, events *worker.Events) *flowControl {
	f := &flowControl{
		enabled: cfg.UI.ConsumePause.Enabled, presets: cfg.UI.ConsumePause.DurationsSeconds, log: log, now: time.Now, events: events,
		pauseGauge: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "svc_consume_pause_active", Help: "1 while an operator's consume pause holds intake.",
		}),
		bpGauge: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "svc_backpressure_active", Help: "1 while in-flight work above pipeline.max_in_flight holds intake.",
		}),
	}
	reg.MustRegister(f.pauseGauge, f.bpGauge)
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

// Pause starts or extends the operator's pause: the deadline becomes now +
// seconds (a re-pause moves it).
func (f *flowControl) Pause(seconds int64) (PauseState, error) {
	if !f.enabled {
		return f.State(), ErrPauseDisabled
	}
	if seconds < 1 || seconds > 3600 {
		return f.State(), &DurationError{Seconds: seconds}
	}
	f.mu.Lock()
	if f.target == nil || !f.target.running() {
		f.mu.Unlock()
		return f.State(), ErrConsumerNotRunning
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
	if !f.enabled {
		return f.State(), ErrPauseDisabled
	}
	f.mu.Lock()
	if f.target == nil || !f.target.running() {
		f.mu.Unlock()
		return f.State(), ErrConsumerNotRunning
	}
	was := f.endLocked()
	f.mu.Unlock()
	if was {
		f.events.State("consume_pause", map[string]any{"active": false, "by": "operator"})
		f.log.Info("consume_pause_ended", "by", "operator")
	}
	return f.State(), nil
}

func (f *flowControl) deadline(gen int) {
	f.mu.Lock()
	if gen != f.gen || !f.operator {
		f.mu.Unlock()
		return
	}
	f.endLocked()
	f.mu.Unlock()
	f.events.State("consume_pause", map[string]any{"active": false, "by": "deadline"})
	f.log.Info("consume_pause_deadline_reached")
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

// setBackpressure is called by the source as in-flight work crosses the
// thresholds.
func (f *flowControl) setBackpressure(on bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.backpressure == on {
		return
	}
	f.backpressure = on
	if on {
		f.bpGauge.Set(1)
	} else {
		f.bpGauge.Set(0)
	}
	f.applyLocked()
}

// applyLocked pauses intake while either actor holds it, resumes it when
// neither does.
func (f *flowControl) applyLocked() {
	want := f.operator || f.backpressure
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

// attach connects the running consumer; detach disconnects it on stop.
func (f *flowControl) attach(t pauseTarget) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.target, f.applied = t, false
	f.applyLocked()
}

func (f *flowControl) detach() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.target = nil
}
