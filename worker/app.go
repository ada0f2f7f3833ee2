package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"svc/recorder"
	"svc/worker/config"
)

// TaskRunner runs one task to its final result (all attempts). The executor
// pool implements it; Run is safe for concurrent use and honours ctx.
type TaskRunner interface {
	Run(ctx context.Context, t *Task) TaskResult
}

// ConfigurationError says a handler lacks what the enabled sources need
// (spec 1.2 rule 4).
type ConfigurationError struct {
	Handler string
	Missing []string
	Reason  string
}

func (e *ConfigurationError) Error() string {
	return fmt.Sprintf("configuration error: handler %s lacks %s, required %s", e.Handler, strings.Join(e.Missing, " and "), e.Reason)
}

// ResultObserver sees every finished task (recorder, live stream). It must
// not block.
type ResultObserver func(res *TaskResult)

// Options are the parts of an App that library users may replace.
type Options struct {
	// Handler is the message handler; nil means the built-in exec handler.
	Handler any
	// Runner runs tasks; nil means the executor pool built from the config.
	Runner TaskRunner
	// Sinks delivers results to the named sinks; nil means none are built.
	Sinks Deliverer
}

// Deliverer sends a finished task's result to its sinks. Implementations
// block while a breaker is open (nothing is dropped) and return an error
// only when ctx ends.
type Deliverer interface {
	Deliver(ctx context.Context, res *TaskResult) error
}

// App is the worker's pipeline core: handler, executor pool, offload and
// I/O pools, metrics and readiness. Sources (HTTP ingress, Kafka) feed it.
type App struct {
	Cfg     *config.Config
	Log     *slog.Logger
	Metrics *Metrics
	Offload *Threads
	IO      *Threads
	IDs     *IDGen
	Started time.Time

	base *slog.Logger // logger without a component, for sub-components

	runner    TaskRunner
	kafka     Handler
	arrange   HTTPArranger
	complete  HTTPCompleter
	sinks     Deliverer
	sinkSet   *SinkSet
	observers []ResultObserver
	commitObs []CommitObserver
	flow      *flowControl
	source    *kafkaSource
	recording recording
	probes    chan struct{}

	// taskCtx outlives intake: accepted work finishes during a drain and is
	// cancelled only when the drain deadline passes.
	taskCtx     context.Context
	cancelTasks context.CancelFunc
	inflight    sync.WaitGroup

	mu      sync.Mutex
	notYet  map[string]string // readiness reasons by component
	closing bool
}

// New builds the App; it starts no goroutines.
func New(cfg *config.Config, log *slog.Logger, reg prometheus.Registerer, opts Options) (*App, error) {
	a := &App{
		Cfg: cfg, Log: log.With("component", "worker"), base: log, IDs: NewIDGen(), Started: time.Now(),
		Offload: NewThreads(cfg.Offload.MaxThreads), IO: NewThreads(cfg.IO.MaxThreads),
		sinks: opts.Sinks, notYet: map[string]string{},
	}
	a.taskCtx, a.cancelTasks = context.WithCancel(context.Background())
	a.recording.worker = cfg.Worker.Name
	for k := range cfg.Executor.Env {
		if a.recording.env == nil {
			a.recording.env = map[string]string{}
		}
		a.recording.env[k] = config.Mask
	}
	h := opts.Handler
	if h == nil {
		h = NewExecHandler(cfg.Handler, a.IDs)
	}
	if err := a.bindHandler(h); err != nil {
		return nil, err
	}
	runner := opts.Runner
	if runner == nil {
		pool, err := NewPool(ExecOptions{
			BinaryPath: cfg.Executor.BinaryPath, Args: cfg.Executor.Args, Env: cfg.Executor.Env,
			PoolSize: cfg.Executor.PoolSize, Timeout: cfg.Executor.Timeout.D(),
			MaxOutputBytes: cfg.Executor.MaxOutputBytes, MaxAttempts: cfg.Handler.MaxAttempts,
			RetryBackoff: cfg.Handler.RetryBackoff.D(), Logger: log.With("component", "executor"),
			OnAttempt: a.recording.attempt,
		})
		if err != nil {
			return nil, fmt.Errorf("executor pool: %w", err)
		}
		runner = pool
	}
	a.runner = runner
	stats, _ := runner.(poolStats)
	if stats == nil {
		stats = fixedStats(cfg.Executor.PoolSize)
	}
	a.Metrics = newMetrics(reg, stats)
	a.Offload.onWait = func(d time.Duration) { a.Metrics.OffloadQueueWait.Observe(d.Seconds()) }
	a.flow = newFlowControl(cfg, reg, log.With("component", "flow"))
	a.flow.rec = &a.recording
	a.probes = make(chan struct{}, ProbeQueueSize)
	if a.sinks == nil && (cfg.SinksRequired() || cfg.DLQTopic() != "") {
		ss, err := NewSinkSet(cfg, reg, a.Metrics.DLQUnconfigured, log.With("component", "sinks"))
		if err != nil {
			return nil, err
		}
		ss.rec, ss.dlq.rec = &a.recording, &a.recording
		a.sinks, a.sinkSet = ss, ss
	}
	if cfg.SinksRequired() && a.sinks == nil {
		return nil, errors.New("sinks are required (Kafka source on or sources.http.sinks_enabled) but no sink could be built")
	}
	if cfg.Sources.Kafka.Enabled {
		a.source = newKafkaSource(a, a.flow, a.sinks, reg)
		// Not ready until the group is joined, from the start: the UI
		// server answers /readyz before Run reaches the consumer.
		a.notYet["kafka"] = "consumer group not joined yet"
	}
	return a, nil
}

func (a *App) bindHandler(h any) error {
	name := fmt.Sprintf("%T", h)
	if a.Cfg.Sources.Kafka.Enabled {
		k, ok := h.(Handler)
		if !ok {
			return &ConfigurationError{Handler: name, Missing: []string{"Arrange"}, Reason: "by sources.kafka.enabled"}
		}
		a.kafka = k
	}
	if a.Cfg.Sources.HTTP.Enabled {
		var missing []string
		arr, ok1 := h.(HTTPArranger)
		if !ok1 {
			missing = append(missing, "ArrangeHTTPRequest")
		}
		comp, ok2 := h.(HTTPCompleter)
		if !ok2 {
			missing = append(missing, "OnHTTPRequestComplete")
		}
		if len(missing) > 0 {
			return &ConfigurationError{Handler: name, Missing: missing, Reason: "by sources.http.enabled (with the HTTPRequest and HTTPResponse models)"}
		}
		a.arrange, a.complete = arr, comp
	}
	return nil
}

// Observe adds a result observer. Call before Run.
func (a *App) Observe(o ResultObserver) { a.observers = append(a.observers, o) }

// KafkaHandler is the bound Kafka handler, nil when the source is off.
func (a *App) KafkaHandler() Handler { return a.kafka }

type fixedStats int

func (f fixedStats) Busy() int    { return 0 }
func (f fixedStats) Size() int    { return int(f) }
func (f fixedStats) Waiting() int { return 0 }

// SetReady marks a component ready (reason "") or not ready with a reason.
func (a *App) SetReady(component, reason string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if reason == "" {
		delete(a.notYet, component)
	} else {
		a.notYet[component] = reason
	}
}

// Ready reports whether every enabled source runs, with the reasons if not.
func (a *App) Ready() (bool, []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	var reasons []string
	if a.closing {
		reasons = append(reasons, "draining: shutdown in progress")
	}
	for c, r := range a.notYet {
		reasons = append(reasons, c+": "+r)
	}
	return len(reasons) == 0, reasons
}

// RunTasks runs tasks concurrently through the executor pool and returns
// their results in task order. Tasks run under the App's task context, not
// ctx's cancellation, so accepted work is not lost when a caller goes away;
// ctx only carries values.
func (a *App) RunTasks(ctx context.Context, source string, tasks []Task) []TaskResult {
	results := make([]TaskResult, len(tasks))
	var wg sync.WaitGroup
	for i := range tasks {
		a.inflight.Add(1)
		wg.Add(1)
		run := func() {
			defer a.inflight.Done()
			defer wg.Done()
			results[i] = a.runOne(source, &tasks[i])
		}
		if i == len(tasks)-1 {
			run()
		} else {
			go run()
		}
	}
	wg.Wait()
	return results
}

func (a *App) runOne(source string, t *Task) TaskResult {
	a.recording.received(t)
	res := a.runner.Run(a.taskCtx, t)
	if res.Task == nil {
		res.Task = t
	}
	a.recording.finished(source, &res)
	a.Metrics.Tasks.WithLabelValues(source, res.Status).Inc()
	a.Metrics.TaskDuration.WithLabelValues(source).Observe(res.Duration.Seconds())
	a.Metrics.Attempts.WithLabelValues(source).Add(float64(res.Attempts))
	for _, o := range a.observers {
		o(&res)
	}
	return res
}

// Drain marks the worker as closing, waits for in-flight tasks up to
// timeout, then cancels whatever still runs. It reports whether everything
// finished in time.
func (a *App) Drain(timeout time.Duration) bool {
	a.mu.Lock()
	a.closing = true
	a.mu.Unlock()
	done := make(chan struct{})
	go func() { a.inflight.Wait(); close(done) }()
	defer a.cancelTasks()
	select {
	case <-done:
		return true
	case <-time.After(timeout):
		return false
	}
}

// Closing reports whether a drain has begun.
func (a *App) Closing() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.closing
}

// Run runs the sources the App owns (the Kafka consumer) until ctx ends;
// the Kafka source drains and commits before Run returns. The HTTP source
// is served by the ingress server, which calls HandleHTTP.
func (a *App) Run(ctx context.Context) error {
	if a.source != nil {
		return a.source.run(ctx)
	}
	<-ctx.Done()
	return nil
}

// Close releases the sink and DLQ producers after a drain.
func (a *App) Close() {
	if a.sinkSet != nil {
		a.sinkSet.Close()
	}
}

// CommitObserver sees every successful offset commit (partition → next
// offset). It must not block.
type CommitObserver func(offsets map[int32]int64)

// ObserveCommits adds a commit observer. Call before Run.
func (a *App) ObserveCommits(o CommitObserver) { a.commitObs = append(a.commitObs, o) }

func (a *App) observeCommit(offsets map[int32]kgo.EpochOffset) {
	m := make(map[int32]int64, len(offsets))
	for p, eo := range offsets {
		m[p] = eo.Offset
	}
	a.recording.event(recorder.TypeOffsetCommitted, "", "", nil, map[string]any{"offsets": m})
	for _, o := range a.commitObs {
		o(m)
	}
}

// ConsumePauseState returns the consume pause state object (spec 2.3).
func (a *App) ConsumePauseState() PauseState { return a.flow.State() }

// ConsumePause pauses Kafka intake for seconds (1-3600). Errors:
// ErrPauseDisabled, ErrConsumerNotRunning, *DurationError.
func (a *App) ConsumePause(seconds int64) (PauseState, error) { return a.flow.Pause(seconds) }

// ConsumeResume ends a consume pause; idempotent.
func (a *App) ConsumeResume() (PauseState, error) { return a.flow.Resume() }

// BreakerStates returns each sink's breaker state (nil without sinks).
func (a *App) BreakerStates() map[string]int {
	if a.sinkSet == nil {
		return nil
	}
	return a.sinkSet.BreakerStates()
}
