package trends

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// A day and more of samples keeps at most an hour of 10-second points and
// a day of 5-minute ones; each step counts what finished in it, failures
// and timeouts apart from successes, and the newest point is the step
// under way.
func TestSamplerBounds(t *testing.T) {
	reg := prometheus.NewRegistry()
	tasks := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "svc_tasks_total", Help: "h"}, []string{"source", "status"})
	lag := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "svc_consumer_lag", Help: "h"}, []string{"partition"})
	reg.MustRegister(tasks, lag)
	start := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	clock := start
	s := New(reg)
	s.now = func() time.Time { return clock }
	s.started = start
	steps := int((25 * time.Hour) / FineStep)
	for i := 1; i <= steps; i++ {
		tasks.WithLabelValues("kafka", "ok").Add(3)
		tasks.WithLabelValues("http", "failed").Inc()
		tasks.WithLabelValues("kafka", "timeout").Inc()
		lag.WithLabelValues("0").Set(float64(i))
		clock = start.Add(time.Duration(i) * FineStep)
		ok, failed, l := read(reg)
		s.add(clock, ok, failed, l)
	}
	clock = clock.Add(4 * time.Second)
	tasks.WithLabelValues("kafka", "ok").Add(7)

	hour := s.Snapshot(time.Hour)
	if hour.StepSeconds != 10 || hour.MaxPoints != FinePoints+1 || len(hour.Points) != FinePoints+1 {
		t.Fatalf("Snapshot(1h) = step %d, max %d, %d points; want 10 s steps, 361 points at most and kept", hour.StepSeconds, hour.MaxPoints, len(hour.Points))
	}
	p := hour.Points[len(hour.Points)-2]
	if p.OK != 3 || p.Failed != 2 || p.Lag == nil || *p.Lag != int64(steps) || p.Open {
		t.Errorf("last closed 10 s point = %+v, want 3 ok, 2 failed, lag %d", p, steps)
	}
	if o := hour.Points[len(hour.Points)-1]; !o.Open || o.OK != 7 || o.TS != clock.Truncate(FineStep).Add(FineStep).UnixMilli() {
		t.Errorf("open point = %+v, want the step under way with its 7 ok tasks", o)
	}
	if want := clock.Add(-time.Hour).UnixMilli(); hour.AvailableFromMS < want-FineStep.Milliseconds() {
		t.Errorf("available_from_ms = %d, want no older than an hour", hour.AvailableFromMS)
	}

	day := s.Snapshot(24 * time.Hour)
	if day.StepSeconds != 300 || len(day.Points) > CoarsePoint+1 || len(day.Points) < CoarsePoint {
		t.Fatalf("Snapshot(24h) = step %d, %d points; want 5-minute steps, a day of them", day.StepSeconds, len(day.Points))
	}
	if p := day.Points[len(day.Points)-2]; p.OK != 3*30 || p.Failed != 2*30 {
		t.Errorf("a closed 5-minute point = %+v, want 30 steps of 3 ok and 2 failed", p)
	}
	if short := s.Snapshot(time.Minute); len(short.Points) != 7 {
		t.Errorf("Snapshot(1m) = %d points, want 6 closed steps and the open one", len(short.Points))
	}
}
