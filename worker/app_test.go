package worker

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"svc/worker/config"
)

// runnerFunc is a TaskRunner built from a function.
type runnerFunc func(context.Context, *Task) TaskResult

func (f runnerFunc) Run(ctx context.Context, t *Task) TaskResult { return f(ctx, t) }

type kafkaOnly struct{}

func (kafkaOnly) Arrange(batch []Message) ([]Task, error) { return nil, nil }

type arrangeOnly struct{ kafkaOnly }

func (arrangeOnly) ArrangeHTTPRequest(*HTTPRequest) ([]Task, error) { return nil, nil }

func TestNewRejectsHandlerWithoutHTTPHooks(t *testing.T) {
	cfg := config.Default()
	cfg.Executor.BinaryPath = "/bin/cat"
	cfg.Sources.HTTP.Enabled = true
	cfg.Resolve()
	runner := runnerFunc(func(_ context.Context, t *Task) TaskResult { return TaskResult{Task: t, Status: StatusOK} })
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
			var ce *ConfigurationError
			if !errors.As(err, &ce) || !strings.Contains(err.Error(), c.missing) || !strings.Contains(err.Error(), "sources.http.enabled") {
				t.Fatalf("New = %v, want *ConfigurationError naming %q", err, c.missing)
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
	for th.Busy() != 2 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := th.Do(ctx, func() { t.Error("ran without a slot") }); err == nil {
		t.Error("Do with a cancelled context and no free slot returned nil")
	}
	close(block)
}
