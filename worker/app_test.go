package worker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"svc/worker/config"
	"svc/worker/model"
	"svc/worker/workertest"
	"svc/worker/workertest/wait"

	"github.com/prometheus/client_golang/prometheus"
)

// runnerFunc is a TaskRunner built from a function.
type runnerFunc func(context.Context, *model.Task) model.TaskResult

func (f runnerFunc) Run(ctx context.Context, t *model.Task) model.TaskResult { return f(ctx, t) }

type kafkaOnly struct{}

func (kafkaOnly) Arrange(batch []model.Message) ([]model.Task, error) { return nil, nil }

type arrangeOnly struct{ kafkaOnly }

func (arrangeOnly) ArrangeHTTPRequest(*model.HTTPRequest) ([]model.Task, error) { return nil, nil }

func TestNewRejectsHandlerWithoutHTTPHooks(t *testing.T) {
	cfg := config.Default()
	cfg.Executor.BinaryPath = "/bin/cat"
	cfg.Sources.HTTP.Enabled, cfg.Sources.HTTP.Host = true, "127.0.0.1"
	cfg.Resolve()
	runner := runnerFunc(func(_ context.Context, t *model.Task) model.TaskResult {
		return model.TaskResult{Task: t, Status: model.StatusOK}
	})
	cases := []struct {
		name    string
		handler any
		missing string
	}{
		{"no HTTP hooks", kafkaOnly{}, "ArrangeHTTPRequest and OnHTTPRequestComplete"},
		{"no completion hook", arrangeOnly{}, "lacks OnHTTPRequestComplete"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := New(&cfg, Deps{Handler: c.handler, Runner: runner})
			var ce *model.MissingHooksError
			if !errors.As(err, &ce) || !strings.Contains(err.Error(), c.missing) || !strings.Contains(err.Error(), "sources.http.enabled") {
				t.Fatalf("New = %v, want *MissingHooksError naming %q", err, c.missing)
			}
		})
	}
	if _, err := New(&cfg, Deps{Runner: runner}); err != nil {
		t.Errorf("built-in exec handler: New = %v", err)
	}
}

func TestThreadsBoundConcurrency(t *testing.T) {
	th := NewThreads(2, nil)
	var running, peak atomic.Int32
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() {
			_ = th.Do(t.Context(), func() {
				n := running.Add(1)
				for {
					p := peak.Load()
					if n <= p || peak.CompareAndSwap(p, n) {
						break
					}
				}
				time.Sleep(5 * time.Millisecond)
				running.Add(-1)
			})
		})
	}
	wg.Wait()
	if peak.Load() != 2 {
		t.Errorf("peak concurrency = %d, want 2 (the pool size)", peak.Load())
	}
	ctx, cancel := context.WithCancel(t.Context())
	block := make(chan struct{})
	go func() { _ = th.Do(t.Context(), func() { <-block }) }()
	go func() { _ = th.Do(t.Context(), func() { <-block }) }()
	wait.For(t, wait.Long, "both slots taken", func() (bool, string) { return th.Busy() == 2, fmt.Sprintf("%d busy", th.Busy()) })
	cancel()
	if err := th.Do(ctx, func() { t.Error("ran without a slot") }); err == nil {
		t.Error("Do with a cancelled context and no free slot returned nil")
	}
	close(block)
}

// TestProbeDuringShutdown: probes racing a drain never corrupt the work
// count (the drain waits for the probes it let in) and once the drain has
// begun new probes are refused with ErrClosing.
func TestProbeDuringShutdown(t *testing.T) {
	t.Parallel()
	cfg := config.Default()
	cfg.Executor.BinaryPath = "/bin/cat"
	cfg.Sources.HTTP.Enabled, cfg.Sources.HTTP.Host = true, "127.0.0.1"
	cfg.Resolve()
	release := make(chan struct{})
	var ran atomic.Int32
	runner := runnerFunc(func(ctx context.Context, t *model.Task) model.TaskResult {
		ran.Add(1)
		select {
		case <-release:
		case <-ctx.Done():
		}
		return model.TaskResult{Task: t, Status: model.StatusOK}
	})
	app, err := New(&cfg, Deps{Runner: runner})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	probe := func() {
		defer wg.Done()
		_, err := app.Probe(context.Background(), ProbeRequest{Value: []byte("x")})
		errs <- err
	}
	wg.Add(1)
	go probe()
	wait.For(t, wait.Long, "the first probe to run", func() (bool, string) { return ran.Load() != 0, "" })
	drained := make(chan bool)
	go func() { drained <- app.Drain(time.Minute) }()
	wait.For(t, wait.Long, "the drain to begin", func() (bool, string) { return app.Closing(), "" })
	for range 32 { // racing the drain: refused, never added to a finished count
		wg.Add(1)
		go probe()
	}
	select {
	case <-drained:
		t.Fatal("Drain returned while a probe it accepted was still running")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	if !<-drained {
		t.Fatal("Drain = false, want true once the probe finished")
	}
	wg.Wait()
	close(errs)
	var ok, closing int
	for err := range errs {
		switch {
		case err == nil:
			ok++
		case errors.Is(err, ErrClosing):
			closing++
		default:
			t.Errorf("probe error %v, want nil or ErrClosing", err)
		}
	}
	if ok != 1 || closing != 32 {
		t.Errorf("%d probes ran and %d were refused, want 1 and 32", ok, closing)
	}
}

// TestLabelsAreBounded: a task with thousands of labels, long names or long
// values runs with at most MaxLabels labels within the size bounds; the
// rest are dropped, counted and noted on the result.
func TestLabelsAreBounded(t *testing.T) {
	t.Parallel()
	cfg := config.Default()
	cfg.Executor.BinaryPath = "/bin/cat"
	cfg.Sources.HTTP.Enabled, cfg.Sources.HTTP.Host = true, "127.0.0.1"
	cfg.Resolve()
	var seen map[string]string
	runner := runnerFunc(func(_ context.Context, t *model.Task) model.TaskResult {
		seen = t.Labels
		return model.TaskResult{Task: t, Status: model.StatusOK, Labels: t.Labels}
	})
	reg := prometheus.NewRegistry()
	app, err := New(&cfg, Deps{Runner: runner, Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{strings.Repeat("n", model.MaxLabelName+1): "long name", "big": strings.Repeat("v", model.MaxLabelValue+1)}
	for i := range 2600 {
		labels[fmt.Sprintf("l%04d", i)] = "x"
	}
	res := app.RunTasks(t.Context(), model.SourceHTTP, []model.Task{{ID: "t1", Labels: labels}})[0]
	if len(seen) != model.MaxLabels || seen["l0000"] != "x" || seen["big"] != "" {
		t.Errorf("executor saw %d labels (l0000=%q, big set %v), want the first %d by name within the bounds", len(seen), seen["l0000"], seen["big"] != "", model.MaxLabels)
	}
	if n := len(res.Annotations); n != 1 || res.Annotations[0].Kind != model.LabelsDroppedKind || res.Annotations[0].Fields()["dropped"] != float64(len(labels)-model.MaxLabels) {
		t.Errorf("annotations = %+v, want one %s with dropped %d", res.Annotations, model.LabelsDroppedKind, len(labels)-model.MaxLabels)
	}
	if got := workertest.Metric(t, reg, "svc_task_labels_dropped_total", "source", model.SourceHTTP); got != float64(len(labels)-model.MaxLabels) {
		t.Errorf("svc_task_labels_dropped_total = %v, want %d", got, len(labels)-model.MaxLabels)
	}
}

// The executor's health reaches readiness and the HTTP path: an
// unavailable executor makes the worker not ready naming it, HandleHTTP
// refuses with ErrExecutorUnavailable without running anything, a result
// that did not run for it is neither delivered nor completed, and only
// Kafka tasks are told to wait for the executor (until the drain).
func TestAppExecutorHealth(t *testing.T) {
	cfg := config.Default()
	cfg.Executor.BinaryPath = "/bin/cat"
	cfg.Sources.HTTP.Enabled, cfg.Sources.HTTP.Host = true, "127.0.0.1"
	cfg.Resolve()
	var ran atomic.Int32
	var unavailable atomic.Bool
	waits := map[string]bool{}
	var mu sync.Mutex
	runner := runnerFunc(func(ctx context.Context, t *model.Task) model.TaskResult {
		ran.Add(1)
		wait, stop := model.ExecutorWait(ctx)
		mu.Lock()
		waits[t.Msg.Source] = wait
		mu.Unlock()
		if wait {
			<-stop // the drain began
		}
		if unavailable.Load() {
			return model.TaskResult{Task: t, Status: model.StatusFailed, Err: fmt.Errorf("%w: gone", model.ErrExecutorUnavailable)}
		}
		return model.TaskResult{Task: t, Status: model.StatusOK}
	})
	a, err := New(&cfg, Deps{Runner: runner})
	if err != nil {
		t.Fatal(err)
	}
	if ready, reasons := a.Ready(); !ready {
		t.Fatalf("Ready = false %q before any executor report", reasons)
	}
	a.SetExecutorHealth(model.ExecutorHealth{State: model.ExecutorUnavailable, Reason: "executor.binary_path cannot be started (no such file or directory)"})
	if ready, reasons := a.Ready(); ready || len(reasons) != 1 || reasons[0] != "executor: executor.binary_path cannot be started (no such file or directory)" {
		t.Errorf("Ready = %v %q, want not ready naming the executor", ready, reasons)
	}
	if _, err := a.HandleHTTP(t.Context(), &model.HTTPRequest{ID: "r1", Body: []byte("x")}); !errors.Is(err, model.ErrExecutorUnavailable) || ran.Load() != 0 {
		t.Errorf("HandleHTTP = %v with %d runs, want ErrExecutorUnavailable and none", err, ran.Load())
	}
	a.SetExecutorHealth(model.ExecutorHealth{State: model.ExecutorAvailable})
	if ready, reasons := a.Ready(); !ready {
		t.Errorf("Ready = false %q once the executor is available", reasons)
	}
	unavailable.Store(true) // turns unavailable while the request runs
	if _, err := a.HandleHTTP(t.Context(), &model.HTTPRequest{ID: "r2", Body: []byte("x")}); !errors.Is(err, model.ErrExecutorUnavailable) {
		t.Errorf("HandleHTTP = %v, want ErrExecutorUnavailable from the unrun result", err)
	}

	done := make(chan []model.TaskResult, 1)
	go func() {
		done <- a.RunTasks(t.Context(), model.SourceKafka, []model.Task{{ID: "k1", Msg: &model.Message{Source: model.SourceKafka}}})
	}()
	wait.For(t, wait.Long, "the Kafka task runs", func() (bool, string) { return ran.Load() == 2, fmt.Sprint(ran.Load(), " runs") })
	a.BeginDrain()
	if res := <-done; !errors.Is(res[0].Err, model.ErrExecutorUnavailable) {
		t.Errorf("Kafka task at the drain = %v, want ErrExecutorUnavailable", res[0].Err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !waits[model.SourceKafka] || waits[model.SourceHTTP] {
		t.Errorf("tasks told to wait for the executor by source: %v, want kafka only", waits)
	}
}
