package throughput

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"time"
)

// MaxCost is the largest cost a label may carry; larger values are skipped
// as too_large so sums stay finite.
const MaxCost = 1e12

// Skip reasons, the values of the reason label and of Snapshot.Skipped keys.
const (
	ReasonMissing    = "missing"     // the task has no cost label
	ReasonNotNumeric = "not_numeric" // the value does not parse as a number
	ReasonNotFinite  = "not_finite"  // NaN or ±Inf
	ReasonNegative   = "negative"    // below zero
	ReasonTooLarge   = "too_large"   // above MaxCost
)

// Reasons lists every skip reason.
func Reasons() []string {
	return []string{ReasonMissing, ReasonNotNumeric, ReasonNotFinite, ReasonNegative, ReasonTooLarge}
}

// maxValueLen bounds the label value parsed; longer is not_numeric.
const maxValueLen = 64

// parseCost returns the cost in value, or the reason it has none.
func parseCost(value string, present bool) (float64, string) {
	if !present {
		return 0, ReasonMissing
	}
	value = strings.TrimSpace(value)
	if value == "" || len(value) > maxValueLen {
		return 0, ReasonNotNumeric
	}
	c, err := strconv.ParseFloat(value, 64)
	outOfRange := errors.Is(err, strconv.ErrRange) // ±Inf, sign kept
	switch {
	case err != nil && !outOfRange:
		return 0, ReasonNotNumeric
	case math.IsNaN(c) || (math.IsInf(c, 0) && !outOfRange):
		return 0, ReasonNotFinite
	case c < 0:
		return 0, ReasonNegative
	case c > MaxCost:
		return 0, ReasonTooLarge
	case c == 0:
		return 0, "" // not -0
	}
	return c, ""
}

// window accumulates one span of tasks.
type window struct {
	start, end time.Time
	tasks      int64
	cost       float64
	wall       time.Duration
	skipped    int64
}

func (w *window) add(cost float64, wall time.Duration) {
	w.tasks++
	w.cost += cost
	w.wall += wall
}

// Window is one throughput window. Lengths are seconds.
type Window struct {
	StartMS int64 `json:"start_ms"`
	EndMS   int64 `json:"end_ms"` // for the current window: when it will close
	// Seconds is the span the rate divides by (for the current window, the
	// time elapsed so far).
	Seconds       float64 `json:"seconds"`
	Tasks         int64   `json:"tasks"`
	Cost          float64 `json:"cost"`
	CostPerSecond float64 `json:"cost_per_second"`
	// Speed is Cost / ExecutorSeconds (0 without executor time).
	ExecutorSeconds float64 `json:"executor_seconds"`
	Speed           float64 `json:"speed"`
	Skipped         int64   `json:"skipped"`
}

// view turns w into its API form, its rate over span.
func (w window) view(end time.Time, span time.Duration) Window {
	v := Window{
		StartMS:         w.start.UnixMilli(),
		EndMS:           end.UnixMilli(),
		Seconds:         span.Seconds(),
		Tasks:           w.tasks,
		Cost:            w.cost,
		ExecutorSeconds: w.wall.Seconds(),
		Skipped:         w.skipped,
	}
	if span > 0 {
		v.CostPerSecond = w.cost / span.Seconds()
	}
	if w.wall > 0 {
		v.Speed = w.cost / w.wall.Seconds()
	}
	return v
}

// windowEnd is the first multiple of Window since the Unix epoch after now.
func (t *Tracker) windowEnd(now time.Time) time.Time {
	w := int64(t.o.Window)
	n := now.UnixNano()
	start := n - ((n%w)+w)%w
	return time.Unix(0, start+w)
}

// roll closes the current window, and the empty ones after it, once now
// has passed its end (a clock that went back keeps it). mu is held.
func (t *Tracker) roll(now time.Time) {
	if now.Before(t.cur.end) {
		return
	}
	t.closeWindow(t.cur)
	// Windows that saw no task, at most History of them.
	missed := int(min(now.Sub(t.cur.end)/t.o.Window, time.Duration(t.o.History)))
	end := t.windowEnd(now)
	for i := missed; i >= 1; i-- {
		s := end.Add(-time.Duration(i+1) * t.o.Window)
		t.closeWindow(window{start: s, end: s.Add(t.o.Window)})
	}
	t.cur = window{start: end.Add(-t.o.Window), end: end}
}

func (t *Tracker) closeWindow(w window) {
	t.closed = append(t.closed, w)
	if len(t.closed) > t.o.History {
		t.closed = t.closed[len(t.closed)-t.o.History:]
	}
}
