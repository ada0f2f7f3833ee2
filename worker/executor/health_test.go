package executor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"svc/worker/model"
	"svc/worker/workertest"
	"svc/worker/workertest/wait"
)

// watched is a pool under test with its logs, metrics and the health
// states its watcher saw.
type watched struct {
	*Pool
	reg    *prometheus.Registry
	logMu  sync.Mutex
	logs   bytes.Buffer
	mu     sync.Mutex
	states []string
}

func watchedPool(t *testing.T, opts Options) *watched {
	t.Helper()
	w := &watched{reg: prometheus.NewRegistry()}
	opts.Registerer = w.reg
	opts.Logger = slog.New(slog.NewTextHandler(&lockedWriter{w: &w.logs, mu: &w.logMu}, nil))
	w.Pool = newPool(t, opts)
	w.WatchExecutorHealth(func(h model.ExecutorHealth) {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.states = append(w.states, h.State)
	})
	return w
}

func (w *watched) seen() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.states)
}

// logged counts the log lines of event.
func (w *watched) logged(event string) int {
	w.logMu.Lock()
	defer w.logMu.Unlock()
	return strings.Count(w.logs.String(), "msg="+event+" ")
}

func (w *watched) healthy(t *testing.T) float64 {
	return workertest.Metric(t, w.reg, "svc_executor_healthy")
}

// install puts an executor in place at path atomically (a rename), so
// that no start sees it half written.
func install(t *testing.T, path, body string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// await waits for a Run started in the background.
func await(t *testing.T, done <-chan model.TaskResult) model.TaskResult {
	t.Helper()
	select {
	case res := <-done:
		return res
	case <-time.After(wait.Long):
		t.Fatalf("Run did not return within %s", wait.Long)
	}
	return model.TaskResult{}
}

// A task that waits for the executor (the Kafka source's tasks do) is not
// failed or charged while the binary is missing: it waits, and runs once
// the binary is installed. The pool reports the episode once: health,
// svc_executor_healthy, one log line each way.
func TestPoolWaitsForUnavailableExecutor(t *testing.T) {
	t.Parallel()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	eachMode(t, func(t *testing.T, mode string) {
		bin := filepath.Join(t.TempDir(), "executor.sh")
		opts := helperOptions(t, mode)
		opts.BinaryPath, opts.Args, opts.MaxAttempts = bin, nil, 1
		p := watchedPool(t, opts)
		p.Start()
		done := make(chan model.TaskResult, 1)
		go func() { done <- p.Run(model.WaitForExecutor(t.Context(), nil), task("payload")) }()
		wait.For(t, wait.Long, "the executor is reported unavailable with the task waiting", func() (bool, string) {
			h := p.ExecutorHealth()
			return h.State == model.ExecutorUnavailable && p.Waiting() == 1, fmt.Sprintf("%+v, %d waiting", h, p.Waiting())
		})
		select {
		case res := <-done:
			t.Fatalf("Run = %s (%v) after %d attempts while the executor is unavailable, want it to wait", res.Status, res.Err, res.Attempts)
		case <-time.After(time.Second):
		}
		if h := p.ExecutorHealth(); !strings.Contains(h.Reason, "executor.binary_path cannot be started (no such file or directory)") || !strings.Contains(h.Detail, bin) {
			t.Errorf("ExecutorHealth = %+v, want the reason and the detail naming the binary", h)
		}
		if got := p.healthy(t); got != 0 {
			t.Errorf("svc_executor_healthy = %v while unavailable, want 0", got)
		}

		install(t, bin, "exec "+self+" exec-helper")
		res := await(t, done)
		if res.Status != model.StatusOK || res.Attempts != 1 || string(res.Output) != "payload" {
			t.Errorf("Run = %s %q after %d attempts (%v), want ok payload after 1", res.Status, res.Output, res.Attempts, res.Err)
		}
		wait.For(t, wait.Long, "the executor is reported available", func() (bool, string) {
			h := p.ExecutorHealth()
			return h.State == model.ExecutorAvailable && p.healthy(t) == 1, fmt.Sprintf("%+v", h)
		})
		if u, a := p.logged("executor_unavailable"), p.logged("executor_available"); u != 1 || a != 1 {
			t.Errorf("executor_unavailable logged %d times, executor_available %d; want once each", u, a)
		}
		first := map[string]string{ModeSpawn: model.ExecutorAvailable, ModePersistent: model.ExecutorStarting}[mode]
		if got, want := p.seen(), []string{first, model.ExecutorUnavailable, model.ExecutorAvailable}; !slices.Equal(got, want) {
			t.Errorf("the watcher saw %v, want %v", got, want)
		}
	})
}

// A waiting task stops waiting for an unavailable executor when its stop
// channel closes (the worker's drain): it ends unrun and uncharged.
func TestPoolWaitEndsAtStop(t *testing.T) {
	eachMode(t, func(t *testing.T, mode string) {
		opts := helperOptions(t, mode)
		opts.BinaryPath, opts.Args = filepath.Join(t.TempDir(), "missing"), nil
		p := watchedPool(t, opts)
		stop := make(chan struct{})
		done := make(chan model.TaskResult, 1)
		go func() { done <- p.Run(model.WaitForExecutor(t.Context(), stop), task("payload")) }()
		wait.For(t, wait.Long, "the executor is reported unavailable with the task waiting", func() (bool, string) {
			h := p.ExecutorHealth()
			return h.State == model.ExecutorUnavailable && p.Waiting() == 1, fmt.Sprintf("%+v, %d waiting", h, p.Waiting())
		})
		close(stop)
		res := await(t, done)
		if res.Status != model.StatusFailed || res.Attempts != 0 || !errors.Is(res.Err, model.ErrExecutorUnavailable) {
			t.Errorf("Run = %s after %d attempts (%v), want failed after 0 with ErrExecutorUnavailable", res.Status, res.Attempts, res.Err)
		}
	})
}

// Start starts a persistent pool's children before any task: the pool is
// "starting" until one is ready, then available.
func TestPersistentStartsChildrenAtStart(t *testing.T) {
	t.Parallel()
	opts := helperOptions(t, ModePersistent)
	opts.PoolSize = 2
	p := watchedPool(t, opts)
	if h := p.ExecutorHealth(); h.State != model.ExecutorStarting || h.Reason == "" {
		t.Errorf("ExecutorHealth before Start = %+v, want starting with a reason", h)
	}
	p.Start()
	wait.For(t, wait.Long, "both children are ready without a task", func() (bool, string) {
		n := workertest.Metric(t, p.reg, "svc_executor_children_ready")
		return n == 2, fmt.Sprintf("%v ready", n)
	})
	if h := p.ExecutorHealth(); h.State != model.ExecutorAvailable {
		t.Errorf("ExecutorHealth = %+v, want available", h)
	}
	if got, want := p.seen(), []string{model.ExecutorStarting, model.ExecutorAvailable}; !slices.Equal(got, want) {
		t.Errorf("the watcher saw %v, want %v", got, want)
	}
}

// Children that write their ready frame and exit at once are no better
// than children that never get ready: the executor is unavailable (once,
// without flapping as each new child gets ready), a waiting task is never
// charged for them, and it runs once the executor is fixed.
func TestPersistentReadyThenExitIsUnavailable(t *testing.T) {
	t.Parallel()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	fixed := filepath.Join(dir, "fixed")
	bin := filepath.Join(dir, "executor.sh")
	install(t, bin, fmt.Sprintf(`[ -e %q ] && exec %q exec-helper
printf '\000\000\000\021{"type":"ready"}\n'
exit 0`, fixed, self))
	opts := helperOptions(t, ModePersistent)
	opts.BinaryPath, opts.Args, opts.PoolSize, opts.MaxAttempts = bin, nil, 2, 1
	p := watchedPool(t, opts)
	done := make(chan model.TaskResult, 1)
	go func() { done <- p.Run(model.WaitForExecutor(t.Context(), nil), task("payload")) }()
	wait.For(t, wait.Long, "the executor is reported unavailable", func() (bool, string) {
		h := p.ExecutorHealth()
		return h.State == model.ExecutorUnavailable, fmt.Sprintf("%+v", h)
	})
	if h := p.ExecutorHealth(); !strings.Contains(h.Reason, "exit right after their ready frame") {
		t.Errorf("ExecutorHealth = %+v, want a reason saying the children exit after their ready frame", h)
	}
	select {
	case res := <-done:
		t.Fatalf("Run = %s (%v) after %d attempts while children die after ready, want it to wait", res.Status, res.Err, res.Attempts)
	case <-time.After(3 * time.Second):
	}
	if n := p.logged("executor_unavailable"); n != 1 {
		t.Errorf("executor_unavailable logged %d times in 3 s of a crash loop, want once", n)
	}
	if err := os.WriteFile(fixed, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	res := await(t, done)
	if res.Status != model.StatusOK || res.Attempts != 1 || string(res.Output) != "payload" {
		t.Errorf("Run = %s %q after %d attempts (%v), want ok payload after 1", res.Status, res.Output, res.Attempts, res.Err)
	}
	wait.For(t, wait.Long, "the executor is reported available", func() (bool, string) {
		h := p.ExecutorHealth()
		return h.State == model.ExecutorAvailable, fmt.Sprintf("%+v", h)
	})
	if u, a := p.logged("executor_unavailable"), p.logged("executor_available"); u != 1 || a != 1 {
		t.Errorf("executor_unavailable logged %d times, executor_available %d; want once each", u, a)
	}
}

// A closed spawn pool runs no re-check: a task that finds the binary
// missing ends at once, waiting or not, instead of retrying the start.
func TestSpawnClosedPoolUnavailableEndsAtOnce(t *testing.T) {
	t.Parallel()
	opts := helperOptions(t, ModeSpawn)
	opts.BinaryPath, opts.Args = filepath.Join(t.TempDir(), "missing"), nil
	p := watchedPool(t, opts)
	p.Close()
	for _, ctx := range []context.Context{t.Context(), model.WaitForExecutor(t.Context(), nil)} {
		done := make(chan model.TaskResult, 1)
		go func() { done <- p.Run(ctx, task("x")) }()
		res := await(t, done)
		if res.Status != model.StatusFailed || res.Attempts != 0 || !errors.Is(res.Err, model.ErrExecutorUnavailable) {
			t.Errorf("Run on a closed pool = %s after %d attempts (%v), want failed after 0 with ErrExecutorUnavailable", res.Status, res.Attempts, res.Err)
		}
	}
}
