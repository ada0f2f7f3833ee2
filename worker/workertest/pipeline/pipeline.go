// Package pipeline builds a worker's pipeline (events, executor pool, sinks,
// App) from a config for tests, the way `svc run` builds it. It is apart
// from workertest so that the executor and sink packages can use
// workertest in their own tests.
package pipeline

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"svc/worker"
	"svc/worker/config"
	"svc/worker/executor"
	"svc/worker/sink"
	"svc/worker/workertest"
)

// P is an App with its executor pool and sinks, built as `svc run`
// builds them.
type P struct {
	App    *worker.App
	Pool   *executor.Pool
	Sinks  *sink.Set // nil when the config needs none
	Events *worker.Events
	Reg    *prometheus.Registry
	Logs   *workertest.Logs
}

// Build resolves and validates cfg and builds its pipeline; handler nil
// means the built-in exec handler. The sink producers close when the test
// ends.
func Build(t testing.TB, cfg *config.Config, handler any) *P {
	t.Helper()
	cfg.Resolve()
	if problems := cfg.Validate(); len(problems) > 0 {
		t.Fatalf("test config invalid:\n%s", strings.Join(problems, "\n"))
	}
	p := &P{Reg: worker.NewRegistry(), Logs: &workertest.Logs{}}
	log := p.Logs.Logger()
	p.Events = worker.NewEvents(cfg.Worker.Name, cfg.Executor.Env)
	opts := executor.ConfigOptions(cfg)
	opts.Logger, opts.OnAttempt, opts.Registerer = log.With("component", "executor"), p.Events.Attempt, p.Reg
	pool, err := executor.NewPool(opts)
	if err != nil {
		t.Fatalf("executor.NewPool: %v", err)
	}
	p.Pool = pool
	t.Cleanup(pool.Close)
	deps := worker.Deps{Handler: handler, Runner: pool, Events: p.Events, Registry: p.Reg, Log: log}
	if cfg.SinksRequired() || cfg.DLQTopic() != "" {
		p.Sinks, err = sink.New(cfg, p.Reg, p.Events, log.With("component", "sinks"))
		if err != nil {
			t.Fatalf("sink.New: %v", err)
		}
		t.Cleanup(p.Sinks.Close)
		deps.Sinks = p.Sinks
	}
	p.App, err = worker.New(cfg, deps)
	if err != nil {
		t.Fatalf("worker.New: %v", err)
	}
	return p
}
