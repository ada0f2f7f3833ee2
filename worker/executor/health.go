package executor

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"svc/worker/model"
)

// Executor health (docs/executor.md, "When the executor is unavailable"):
// while the executor cannot run anything no attempt is charged; tasks wait
// (model.WaitForExecutor) or fail with model.ErrExecutorUnavailable.

// Spawn mode's re-check of an unavailable binary after base·2^n, capped.
const (
	recheckBase = 100 * time.Millisecond
	recheckMax  = 5 * time.Second
)

// probation is how long a persistent child that got ready while the
// executor was unavailable must live (or answer a task) before it counts
// as available again, so that children dying at once do not flap it.
const probation = time.Second

// waitPolicy is how an attempt behaves while the executor is
// unavailable (from model.ExecutorWait).
type waitPolicy struct {
	wait bool            // wait for the executor instead of failing at once
	stop <-chan struct{} // closed: stop waiting (nil: never)
}

// health publishes changes of the backend's state to the gauge, the log
// and the watchers, one change at a time, in order.
type health struct {
	mu       sync.Mutex // serialises refresh and the watchers
	status   func() model.ExecutorHealth
	cur      model.ExecutorHealth
	since    time.Time // start of the current unavailable episode
	watchers []func(model.ExecutorHealth)
	gauge    prometheus.Gauge
	log      *slog.Logger
	mode     string
}

func newExecHealth(reg prometheus.Registerer, log *slog.Logger, mode string) (*health, error) {
	h := &health{log: log, mode: mode, gauge: prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "svc_executor_healthy",
		Help: "0 while the executor is unavailable (its binary cannot be started, or no persistent child gets ready): tasks wait and Kafka intake is held; else 1.",
	})}
	h.gauge.Set(1)
	if reg != nil {
		if err := reg.Register(h.gauge); err != nil {
			return nil, fmt.Errorf("register executor metrics: %w", err)
		}
	}
	return h, nil
}

// bind sets the backend's state function and takes the state now.
func (h *health) bind(status func() model.ExecutorHealth) {
	h.status = status
	h.cur = status()
}

// refresh publishes the backend's state if it changed. Backends call it
// after every change that may matter, outside their own locks.
func (h *health) refresh() {
	h.mu.Lock()
	defer h.mu.Unlock()
	next, prev := h.status(), h.cur
	if next.State == prev.State && next.Reason == prev.Reason {
		h.cur.Detail = next.Detail
		return
	}
	h.cur = next
	down := next.State == model.ExecutorUnavailable
	switch {
	case down && prev.State != model.ExecutorUnavailable:
		h.since = time.Now()
		h.gauge.Set(0)
		h.log.Warn("executor_unavailable", "mode", h.mode, "reason", next.Reason, "error", next.Detail,
			"detail", "the executor cannot run tasks: tasks wait for it uncharged (Kafka intake is held), the HTTP ingress answers 503")
	case !down && prev.State == model.ExecutorUnavailable:
		h.gauge.Set(1)
		h.log.Info("executor_available", "mode", h.mode, "unavailable_for", time.Since(h.since).Round(time.Millisecond).String())
	}
	for _, f := range h.watchers {
		f(next)
	}
}

// watch adds a watcher and calls it with the health now.
func (h *health) watch(f func(model.ExecutorHealth)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.watchers = append(h.watchers, f)
	f(h.cur)
}

// unavailable is the error of a task that found the executor unavailable.
func unavailable(cause error) error {
	return fmt.Errorf("%w: %w", model.ErrExecutorUnavailable, cause)
}

// startCause is a start-up error in short, without the executor's output
// (for /readyz).
func startCause(err error) string {
	var se *startErr
	if errors.As(err, &se) {
		return "executor.binary_path cannot be started (" + se.err.Error() + ")"
	}
	return "the executor cannot be started"
}

// messageStartError reports a start failure caused by the task: an
// environment too large for exec (E2BIG). It fails the task.
func messageStartError(err error) bool { return errors.Is(err, syscall.E2BIG) }

// startErr is a failed exec of the executor binary.
type startErr struct {
	bin string
	err error
}

func (e *startErr) Error() string {
	return fmt.Sprintf("%s: executor.binary_path %q: %s", ErrStart, e.bin, e.err)
}

func (e *startErr) Unwrap() []error { return []error{ErrStart, e.err} }

// startError explains a failed start, naming the config key.
func startError(bin string, err error) error {
	var pe *fs.PathError
	var ee *exec.Error
	switch {
	case errors.As(err, &pe):
		err = pe.Err
	case errors.As(err, &ee):
		err = ee.Err
	}
	return &startErr{bin: bin, err: err}
}

// backoffAt is base·2^n capped at limit.
func backoffAt(base, limit time.Duration, n int) time.Duration {
	if n > 20 {
		return limit
	}
	return min(base<<n, limit)
}
