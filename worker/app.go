package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"svc/worker/config"
	"svc/worker/model"
)

// Deps are the parts an App is built from; only Runner is required.
type Deps struct {
	Handler  any              // nil: the built-in exec handler
	Runner   model.TaskRunner // the executor pool
	Sinks    model.Deliverer  // required when results go to sinks
	Cache    model.TaskCache  // nil: no handler cache
	Events   *model.Events    // nil drops events
	Registry prometheus.Registerer
	Cost     model.CostObserver // throughput.cost_label; nil: off
	Log      *slog.Logger
}

// App is the pipeline core the sources feed: handler, executor pool,
// sinks, the work in flight for the drain, and readiness.
type App struct {
	cfg     *config.Config
	log     *slog.Logger
	metrics *Metrics
	offload *Threads
	io      *Threads
	ids     *IDGen
	started time.Time
	events  *model.Events
	running *RunningTasks

	runner   model.TaskRunner
	cost     model.CostObserver
	kafka    model.Handler
	arrange  model.HTTPArranger
	complete model.HTTPCompleter
	sinks    model.Deliverer
	cache    model.TaskCache
	probes   chan struct{}

	// taskCtx outlives intake; it ends when the drain deadline passes.
	taskCtx      context.Context
	cancelTasks  context.CancelFunc
	kafkaCtx     context.Context // taskCtx, waiting for the executor (WaitForExecutor)
	work         workCount
	workDone     func()        // work.done, bound once
	drainStarted chan struct{} // closed when the drain begins

	mu       sync.Mutex
	notYet   map[string]string // readiness reasons by component
	closing  bool
	execHlth model.ExecutorHealth // the executor's, as last reported
}

// New builds the App; it starts no goroutines.
func New(cfg *config.Config, d Deps) (*App, error) {
	if d.Runner == nil {
		return nil, errors.New("worker: a task runner (the executor pool) is required")
	}
	if d.Log == nil {
		d.Log = slog.New(slog.DiscardHandler)
	}
	if d.Registry == nil {
		d.Registry = prometheus.NewRegistry()
	}
	a := &App{
		cfg: cfg, log: d.Log.With("component", "worker"), ids: NewIDGen(), started: time.Now(), events: d.Events, running: newRunningTasks(),
		runner: d.Runner, cost: d.Cost, sinks: d.Sinks, cache: d.Cache, notYet: map[string]string{}, probes: make(chan struct{}, ProbeQueueSize),
		drainStarted: make(chan struct{}), execHlth: model.ExecutorHealth{State: model.ExecutorAvailable},
	}
	a.workDone = a.work.done
	a.taskCtx, a.cancelTasks = context.WithCancel(context.Background())
	a.kafkaCtx = model.WaitForExecutor(a.taskCtx, a.drainStarted)
	h := d.Handler
	if h == nil {
		h = NewExecHandler(cfg, a.ids)
	}
	if err := a.bindHandler(h); err != nil {
		return nil, err
	}
	stats, _ := d.Runner.(model.PoolStats)
	if stats == nil {
		stats = fixedStats(cfg.Executor.PoolSize)
	}
	a.metrics = newMetrics(d.Registry, stats)
	a.offload = NewThreads(cfg.Offload.MaxThreads, func(wait time.Duration) { a.metrics.OffloadQueueWait.Observe(wait.Seconds()) })
	a.io = NewThreads(cfg.IO.MaxThreads, nil)
	if cfg.SinksRequired() && d.Sinks == nil {
		return nil, errors.New("sinks are required (Kafka source on or sources.http.sinks_enabled) but none were given")
	}
	if cfg.Sources.Kafka.Enabled {
		a.notYet["kafka"] = "consumer group not joined yet"
	}
	return a, nil
}

func (a *App) bindHandler(h any) error {
	name := fmt.Sprintf("%T", h)
	if a.cfg.Sources.Kafka.Enabled {
		k, ok := h.(model.Handler)
		if !ok {
			return &model.MissingHooksError{Handler: name, Missing: []string{"Arrange"}, Reason: "by sources.kafka.enabled"}
		}
		a.kafka = k
	}
	if a.cfg.Sources.HTTP.Enabled {
		var missing []string
		arr, ok1 := h.(model.HTTPArranger)
		if !ok1 {
			missing = append(missing, "ArrangeHTTPRequest")
		}
		comp, ok2 := h.(model.HTTPCompleter)
		if !ok2 {
			missing = append(missing, "OnHTTPRequestComplete")
		}
		if len(missing) > 0 {
			return &model.MissingHooksError{Handler: name, Missing: missing, Reason: "by sources.http.enabled (with the HTTPRequest and HTTPResponse models)"}
		}
		a.arrange, a.complete = arr, comp
	}
	return nil
}

type fixedStats int

func (f fixedStats) Busy() int    { return 0 }
func (f fixedStats) Size() int    { return int(f) }
func (f fixedStats) Waiting() int { return 0 }

// Config is the worker's configuration; callers must not modify it.
func (a *App) Config() *config.Config { return a.cfg }

// Events is the flight-recorder event emitter (possibly nil, which drops).
func (a *App) Events() *model.Events { return a.events }

// IDs makes task and request ids.
func (a *App) IDs() *IDGen { return a.ids }

// IO is the blocking-I/O pool (io.max_threads).
func (a *App) IO() *Threads { return a.io }

// Running is the registry of the tasks running now.
func (a *App) Running() *RunningTasks { return a.running }

// Started is when the App was built.
func (a *App) Started() time.Time { return a.started }

// AttachRecorder sends events and the masked config to rec; call it
// before the sources run.
func (a *App) AttachRecorder(rec model.EventRecorder) {
	if a.events == nil {
		a.events = model.NewEvents(a.cfg.Worker.Name, a.cfg.Executor.Env)
		a.events.KeepOKTail = a.cfg.History.TaskDetail == "full"
	}
	a.events.Attach(rec)
	masked, _ := json.Marshal(a.cfg.Masked())
	rec.ConfigSnapshot(masked)
}

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

// SetExecutorHealth records the executor's health (readiness, and a
// state event on change).
func (a *App) SetExecutorHealth(h model.ExecutorHealth) {
	a.mu.Lock()
	prev := a.execHlth
	a.execHlth = h
	a.mu.Unlock()
	reason := ""
	if !h.Available() {
		reason = h.Reason
		if reason == "" {
			reason = h.State
		}
	}
	a.SetReady("executor", reason)
	if prev.State != h.State || prev.Reason != h.Reason {
		a.events.State("executor", map[string]any{"state": h.State, "reason": h.Reason})
	}
}

// ExecutorHealth is the executor's health as last reported.
func (a *App) ExecutorHealth() model.ExecutorHealth {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.execHlth
}

// executorUnavailable is the error of work refused for the executor.
func (a *App) executorUnavailable() error {
	if h := a.ExecutorHealth(); h.State == model.ExecutorUnavailable {
		return fmt.Errorf("%w: %s", model.ErrExecutorUnavailable, h.Reason)
	}
	return nil
}

// Ready reports whether every source runs and no drain began, or why not.
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

// TaskContext is the context tasks and deliveries run under (taskCtx).
func (a *App) TaskContext() context.Context { return a.taskCtx }

// Hold registers one unit of accepted work the drain waits for; call the
// returned func when it is done. Safe at any time.
func (a *App) Hold() (done func()) {
	a.work.add()
	return a.workDone
}

// Arrange runs the Kafka handler's Arrange on the offload pool.
func (a *App) Arrange(ctx context.Context, batch []model.Message) ([]model.Task, error) {
	tasks, err := Call(ctx, a.offload, func() ([]model.Task, error) { return a.kafka.Arrange(batch) })
	if err != nil && ctx.Err() == nil {
		a.metrics.ArrangeErrors.WithLabelValues(model.SourceKafka).Inc()
	}
	return tasks, err
}

// RunTasks runs tasks concurrently through the executor pool and returns
// their results in task order, under the task context (ctx is unused).
func (a *App) RunTasks(ctx context.Context, source string, tasks []model.Task) []model.TaskResult {
	if len(tasks) == 1 { // the usual case: no goroutine, closure or group
		done := a.Hold()
		defer done()
		return []model.TaskResult{a.runOne(source, &tasks[0])}
	}
	results := make([]model.TaskResult, len(tasks))
	var wg sync.WaitGroup
	for i := range tasks {
		done := a.Hold()
		wg.Add(1)
		run := func() {
			defer done()
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

func (a *App) runOne(source string, t *model.Task) model.TaskResult {
	var dropped int
	t.Labels, dropped = model.LimitLabels(t.Labels)
	a.events.Received(t)
	var undo func()
	if a.cache != nil {
		undo = a.cache.Prepare(t)
	}
	ctx := a.taskCtx
	if source == model.SourceKafka {
		ctx = a.kafkaCtx // waits for an unavailable executor until the drain
	}
	a.running.add(t, source, time.Now())
	res := a.runner.Run(ctx, t)
	a.running.remove(t)
	if res.Task == nil {
		res.Task = t
	}
	if a.cache != nil {
		undo()
		a.cache.Commit(source, &res)
	}
	var late int // added by the executor (fd 3 or its result frame)
	res.Labels, late = model.LimitLabels(res.Labels)
	if n := dropped + late; n > 0 {
		a.metrics.LabelsDropped.WithLabelValues(source).Add(float64(n))
		res.Annotations = append(res.Annotations, model.Annotation{Kind: model.LabelsDroppedKind, Payload: model.AnnotationPayload(map[string]any{
			"dropped": n, "max_labels": model.MaxLabels, "max_name_bytes": model.MaxLabelName, "max_value_bytes": model.MaxLabelValue,
		})})
	}
	if a.cost != nil && res.Status == model.StatusOK {
		if cost, speed, ok := a.cost.Observe(res.Labels, res.Duration); ok {
			res.Annotations = append(res.Annotations, model.Annotation{Kind: model.CostKind, Payload: model.AnnotationPayload(map[string]any{
				"cost": cost, "speed_per_second": speed, "wall_ms": res.Duration.Milliseconds(),
			})})
		}
	}
	a.events.Finished(source, &res)
	a.metrics.Attempts.WithLabelValues(source).Add(float64(res.Attempts))
	if source == model.SourceProbe { // not traffic: kept out of svc_tasks_total
		a.metrics.ProbeTasks.WithLabelValues(res.Status).Inc()
		return res
	}
	a.metrics.Tasks.WithLabelValues(source, res.Status).Inc()
	a.metrics.TaskDuration.WithLabelValues(source).Observe(res.Duration.Seconds())
	return res
}

// Deliver hands a result to the sinks (if any) under the task context.
func (a *App) Deliver(res *model.TaskResult) error {
	if a.sinks == nil {
		return nil
	}
	return a.sinks.Deliver(a.taskCtx, res)
}

// DeliverAsync is Deliver without holding the caller: done gets Deliver's
// error exactly once (at once, on this goroutine, without sinks).
func (a *App) DeliverAsync(res *model.TaskResult, done func(error)) {
	switch d := a.sinks.(type) {
	case nil:
		done(nil)
	case model.AsyncDeliverer:
		d.DeliverAsync(a.taskCtx, res, done)
	default:
		go func() { done(d.Deliver(a.taskCtx, res)) }()
	}
}

// BeginDrain marks the worker as closing (not ready, probes refused).
func (a *App) BeginDrain() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.closing {
		close(a.drainStarted)
	}
	a.closing = true
}

// Drain begins the drain, waits up to timeout for the work in flight,
// then cancels what still runs; true when everything finished in time.
func (a *App) Drain(timeout time.Duration) bool {
	a.BeginDrain()
	defer a.cancelTasks()
	return a.work.wait(timeout)
}

// Closing reports whether a drain has begun.
func (a *App) Closing() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.closing
}
