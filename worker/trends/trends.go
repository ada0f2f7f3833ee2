// Package trends keeps a worker's recent throughput, failures and consumer
// lag in memory, sampled from its own metrics, for the Dashboard's trend
// charts (GET /api/v1/dashboard/trends): the last hour in 10-second steps
// and the last 24 hours in 5-minute steps. Steps are aligned to the wall
// clock, so the points of a fleet's workers add up.
package trends

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// The two resolutions and their bounds.
const (
	FineStep    = 10 * time.Second
	FinePoints  = 360 // one hour
	CoarseStep  = 5 * time.Minute
	CoarsePoint = 288 // 24 hours
	// MaxWindow is the longest window a snapshot covers.
	MaxWindow = CoarseStep * CoarsePoint
	// MinWindow is the shortest.
	MinWindow = time.Minute
)

// Point is one step of a worker's trend: the tasks that finished in the
// step ending at TS (probes excepted) and the consumer lag at its end.
type Point struct {
	TS int64 `json:"ts_ms"`
	// OK are tasks finished ok; Failed those failed or timed out.
	OK     int64 `json:"ok"`
	Failed int64 `json:"failed"`
	// Lag is the lag of the partitions this worker answers for
	// (svc_consumer_lag plus svc_consumer_lag_orphaned); null without a
	// Kafka source or before the offsets were first read.
	Lag *int64 `json:"lag"`
	// Open marks the newest point, the step under way.
	Open bool `json:"open,omitempty"`
}

// Series is one worker's trend over a window.
type Series struct {
	StepSeconds int64 `json:"step_seconds"`
	// AvailableFromMS is where this worker's data for the resolution
	// starts.
	AvailableFromMS int64   `json:"available_from_ms"`
	MaxPoints       int     `json:"max_points"`
	Points          []Point `json:"points"`
}

// Sampler samples a registry every FineStep; Run is the only writer.
type Sampler struct {
	g       prometheus.Gatherer
	now     func() time.Time
	started time.Time

	mu     sync.Mutex
	fine   ring
	coarse ring
	// last counters read, and the coarse step being filled.
	lastOK, lastFailed float64
	acc                Point
}

// New returns a sampler of g; it samples nothing until Run.
func New(g prometheus.Gatherer) *Sampler {
	now := time.Now
	return &Sampler{g: g, now: now, started: now(), fine: newRing(FinePoints), coarse: newRing(CoarsePoint)}
}

// Run samples at every FineStep boundary of the wall clock until ctx ends.
func (s *Sampler) Run(ctx context.Context) error {
	for {
		now := s.now()
		next := now.Truncate(FineStep).Add(FineStep)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(next.Sub(now)):
		}
		ok, failed, lag := read(s.g)
		s.add(next, ok, failed, lag)
	}
}

// add closes the fine step ending at at with the counters read then.
func (s *Sampler) add(at time.Time, ok, failed float64, lag *int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := Point{TS: at.UnixMilli(), OK: delta(ok, s.lastOK), Failed: delta(failed, s.lastFailed), Lag: lag}
	s.lastOK, s.lastFailed = ok, failed
	s.fine.push(p)
	end := at.Truncate(CoarseStep)
	if !at.Equal(end) {
		end = end.Add(CoarseStep)
	}
	if s.acc.TS != 0 && s.acc.TS != end.UnixMilli() {
		s.coarse.push(s.acc)
		s.acc = Point{}
	}
	s.acc.TS = end.UnixMilli()
	s.acc.OK += p.OK
	s.acc.Failed += p.Failed
	s.acc.Lag = lag
}

// delta is how much a counter grew (a smaller value is a fresh start).
func delta(now, before float64) int64 {
	if now < before {
		return int64(now)
	}
	return int64(now - before)
}

// Snapshot returns the points of the last window (MinWindow to
// MaxWindow): 10-second steps up to an hour, 5-minute steps beyond, the
// newest being the step under way.
func (s *Sampler) Snapshot(window time.Duration) Series {
	ok, failed, lag := read(s.g)
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	step, r, bound := FineStep, &s.fine, FinePoints
	if window > FineStep*FinePoints {
		step, r, bound = CoarseStep, &s.coarse, CoarsePoint
	}
	from := now.Add(-window).UnixMilli()
	out := Series{StepSeconds: int64(step / time.Second), MaxPoints: bound + 1, Points: []Point{}}
	pts := r.points()
	if step == CoarseStep && s.acc.TS != 0 {
		pts = append(pts, s.acc)
	}
	// The step under way (for the coarse step, added to its filled part).
	open := Point{OK: delta(ok, s.lastOK), Failed: delta(failed, s.lastFailed), Lag: lag, Open: true}
	end := now.Truncate(step).Add(step)
	open.TS = end.UnixMilli()
	if n := len(pts); n > 0 && pts[n-1].TS == open.TS {
		open.OK += pts[n-1].OK
		open.Failed += pts[n-1].Failed
		pts = pts[:n-1]
	}
	pts = append(pts, open)
	for _, p := range pts {
		if p.TS > from {
			out.Points = append(out.Points, p)
		}
	}
	if len(out.Points) > out.MaxPoints {
		out.Points = out.Points[len(out.Points)-out.MaxPoints:]
	}
	out.AvailableFromMS = s.started.UnixMilli()
	if len(pts) > 0 {
		out.AvailableFromMS = max(out.AvailableFromMS, pts[0].TS-step.Milliseconds())
	}
	return out
}

// read sums the task counters and the lag the worker exports.
func read(g prometheus.Gatherer) (ok, failed float64, lag *int64) {
	mfs, err := g.Gather()
	if err != nil && len(mfs) == 0 {
		return 0, 0, nil
	}
	var l float64
	seen := false
	for _, mf := range mfs {
		switch mf.GetName() {
		case "svc_tasks_total":
			for _, m := range mf.GetMetric() {
				if label(m, "status") == "ok" {
					ok += m.GetCounter().GetValue()
				} else {
					failed += m.GetCounter().GetValue()
				}
			}
		case "svc_consumer_lag", "svc_consumer_lag_orphaned":
			for _, m := range mf.GetMetric() {
				l += m.GetGauge().GetValue()
				seen = true
			}
		}
	}
	if seen {
		v := int64(l)
		lag = &v
	}
	return ok, failed, lag
}

func label(m *dto.Metric, name string) string {
	for _, lp := range m.GetLabel() {
		if lp.GetName() == name {
			return lp.GetValue()
		}
	}
	return ""
}

// ring keeps the newest n points, oldest first.
type ring struct {
	pts []Point
	n   int
}

func newRing(n int) ring { return ring{n: n} }

func (r *ring) push(p Point) {
	if len(r.pts) == r.n {
		r.pts = slices.Delete(r.pts, 0, 1)
	}
	r.pts = append(r.pts, p)
}

// points returns a copy of the kept points.
func (r *ring) points() []Point { return slices.Clone(r.pts) }
