package worker

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"
)

// Runner is a long-running component: Run serves until ctx ends (or it
// fails), then stops and returns once its own goroutines are done.
type Runner interface {
	Run(ctx context.Context) error
}

// Lifecycle is the one start and shutdown sequence of a worker:
//
//  1. services start (they outlive intake, so probes, metrics and history
//     answer during the drain);
//  2. the App is marked running and intake starts;
//  3. when ctx ends or any component fails: readiness flips to 503,
//     intake stops, the App drains up to the grace period, OnDrained runs;
//  4. services stop, then Release funcs run, each in reverse order.
//
// It is the one owner of shutdown: nothing it was given is closed by
// anyone else once Run starts.
type Lifecycle struct {
	app      *App
	grace    time.Duration
	log      *slog.Logger
	drained  []func()
	services []named
	intake   []named
	releases []func()
	once     sync.Once
}

type named struct {
	name string
	r    Runner
	stop context.CancelFunc
}

// NewLifecycle returns the lifecycle of app; grace bounds the drain
// (worker.shutdown_timeout).
func NewLifecycle(app *App, grace time.Duration, log *slog.Logger) *Lifecycle {
	return &Lifecycle{app: app, grace: grace, log: log}
}

// Service adds a component that runs from start to the very end.
func (l *Lifecycle) Service(name string, r Runner) {
	l.services = append(l.services, named{name: name, r: r})
}

// Intake adds a component that feeds the App; intake stops first.
func (l *Lifecycle) Intake(name string, r Runner) {
	l.intake = append(l.intake, named{name: name, r: r})
}

// OnDrained adds a func called after the drain, before the services stop.
func (l *Lifecycle) OnDrained(f func()) { l.drained = append(l.drained, f) }

// Release adds a func called once at the very end, in reverse order.
func (l *Lifecycle) Release(f func()) { l.releases = append(l.releases, f) }

// Abandon runs the OnDrained and Release funcs without running anything
// (a worker built but never run). After Run it does nothing.
func (l *Lifecycle) Abandon() {
	l.once.Do(func() {
		for _, f := range l.drained {
			f()
		}
		l.release()
	})
}

func (l *Lifecycle) release() {
	for i := len(l.releases) - 1; i >= 0; i-- {
		l.releases[i]()
	}
}

// Run runs every component until ctx ends or one fails, then shuts down;
// it returns the first component error.
func (l *Lifecycle) Run(ctx context.Context) error {
	ran := false
	l.once.Do(func() { ran = true })
	if !ran {
		return errors.New("lifecycle: run twice or after Abandon")
	}
	defer l.release()
	var (
		errOnce  sync.Once
		firstErr error
	)
	failed, fail := context.WithCancel(ctx)
	defer fail()
	report := func(name string, err error) {
		if err != nil && !errors.Is(err, context.Canceled) {
			errOnce.Do(func() { firstErr = err })
			l.log.Error("component_failed", "component", name, "error", err.Error())
			fail()
		}
	}
	start := func(ctx context.Context, c named) chan struct{} {
		done := make(chan struct{})
		go func() {
			defer close(done)
			report(c.name, c.r.Run(ctx))
		}()
		return done
	}
	svcDone := make([]chan struct{}, len(l.services))
	for i := range l.services {
		svcCtx, stop := context.WithCancel(context.Background())
		defer stop()
		l.services[i].stop = stop
		svcDone[i] = start(svcCtx, l.services[i])
	}
	l.app.events.State("running", map[string]any{"release": Version})
	var intakeDone []chan struct{}
	for _, c := range l.intake {
		intakeDone = append(intakeDone, start(failed, c))
	}

	<-failed.Done()
	stopAt := time.Now()
	l.app.BeginDrain()
	l.app.events.State("draining", nil)
	for _, d := range intakeDone {
		<-d
	}
	if !l.app.Drain(max(0, l.grace-time.Since(stopAt))) {
		l.log.Warn("drain_deadline_reached", "shutdown_timeout", l.grace.String())
	}
	for _, f := range l.drained {
		f()
	}
	l.app.events.State("stopped", nil)
	for i := len(l.services) - 1; i >= 0; i-- {
		l.services[i].stop()
		<-svcDone[i]
	}
	return firstErr
}
