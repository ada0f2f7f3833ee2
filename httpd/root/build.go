// Package root is the worker's one composition root: New turns a
// validated config into the worker and Worker.Run runs it under the one
// lifecycle. `svc run`, `svc demo` and every test that needs a whole worker
// call it, swapping parts only through Options, so what is tested is what
// runs. New builds in dependency order (each part may use the ones before
// it); shutdown is worker.Lifecycle's: intake, drain, sinks, services in
// reverse, then the released parts in reverse build order.
package root

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"svc/httpd"
	"svc/kafkaread"
	"svc/recorder"
	"svc/ui"
	"svc/ui/release"
	"svc/worker"
	"svc/worker/cache"
	"svc/worker/config"
	"svc/worker/executor"
	"svc/worker/fleet"
	"svc/worker/kafka"
	"svc/worker/model"
	"svc/worker/redrive"
	"svc/worker/runtimehealth"
	"svc/worker/sink"
	"svc/worker/throughput"
	"svc/worker/trends"
)

// Options swap parts of the worker. The zero value builds what `svc run`
// builds from the config alone.
type Options struct {
	// Log is the base logger; nil discards.
	Log *slog.Logger
	// Handler is the message handler; nil is the built-in exec handler.
	Handler any
	// Runner runs tasks instead of the executor pool built from cfg.Executor.
	Runner model.TaskRunner
	// GuardBinary is the binary the executor pool starts as the guard that
	// kills executor trees left by a SIGKILLed worker; "" runs without it.
	GuardBinary string
}

// Worker is a built worker: its parts (nil when switched off, for reading
// only: the lifecycle owns their shutdown), its sockets and its lifecycle.
type Worker struct {
	Config   *config.Config
	Log      *slog.Logger
	Registry *prometheus.Registry
	Events   *model.Events
	App      *worker.App
	// Pool is the executor pool (nil when Options.Runner replaced it).
	Pool       *executor.Pool
	Monitor    *runtimehealth.Monitor
	Throughput *throughput.Tracker
	Cache      *cache.Store
	Sinks      *sink.Set
	Kafka      *kafka.Source
	Fleet      *fleet.Registry
	Recorder   *recorder.Recorder
	Reader     *kafkaread.Reader
	Redrive    *redrive.Redriver
	Site       *release.Site
	UI         *httpd.UIServer
	Exchange   *cache.Exchange
	Trends     *trends.Sampler
	Metrics    *httpd.MetricsServer
	Ingress    *httpd.Ingress
	// Features are the switches identity advertises.
	Features map[string]bool

	life    *worker.Lifecycle
	lns     *httpd.Listeners
	pages   []ui.Page // the handler's, validated and normalized (bindUI)
	details ui.ProbeDetails
}

// New builds the worker from a validated cfg. It binds every enabled
// socket first (a bind failure is fatal before anything is opened) and
// starts nothing: Run does. On an error it releases what it had built.
func New(ctx context.Context, cfg *config.Config, o Options) (w *Worker, err error) {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	w = &Worker{Config: cfg, Log: o.Log, Registry: worker.NewRegistry()}
	var own owned // released on error until the lifecycle takes them
	defer func() {
		if err != nil {
			own.abandon()
		}
	}()
	if w.lns, err = httpd.Bind(cfg); err != nil {
		return nil, err
	}
	w.lns.Log(o.Log)
	own.release(w.lns.Close)
	log, reg := o.Log, w.Registry
	w.Events = model.NewEvents(cfg.Worker.Name, cfg.Executor.Env)
	w.Events.KeepOKTail = cfg.History.TaskDetail == "full"

	runner := o.Runner
	if runner == nil {
		opts := executor.ConfigOptions(cfg)
		opts.Logger, opts.OnAttempt, opts.Registerer = log.With("component", "executor"), w.Events.Attempt, reg
		opts.GuardBinary = o.GuardBinary
		if w.Pool, err = executor.NewPool(opts); err != nil {
			return nil, fmt.Errorf("executor pool: %w", err)
		}
		own.release(w.Pool.Close)
		runner = w.Pool
	}
	stats, _ := runner.(model.PoolStats)
	if w.Monitor, w.Throughput, err = newMonitors(cfg, w.Events, stats, reg, log); err != nil {
		return nil, err
	}
	deps := worker.Deps{Handler: o.Handler, Runner: runner, Events: w.Events, Registry: reg, Log: log}
	if w.Throughput.Enabled() {
		deps.Cost = w.Throughput
	}
	if w.Cache, err = openCache(ctx, cfg, reg, log); err != nil {
		return nil, err
	}
	if w.Cache != nil {
		own.release(func() { _ = w.Cache.Close() })
		deps.Cache = cache.NewTasks(w.Cache, cfg.Handler.CacheKeys)
	}
	if cfg.SinksRequired() || cfg.DLQTopic() != "" {
		if w.Sinks, err = sink.New(cfg, reg, w.Events, log.With("component", "sinks")); err != nil {
			return nil, err
		}
		own.drained = append(own.drained, w.Sinks.Close)
		deps.Sinks = w.Sinks
		w.Events.Deliveries = deliveries(cfg, w.Sinks)
	}
	if w.App, err = worker.New(cfg, deps); err != nil {
		return nil, err
	}
	if w.pages, w.details, err = bindUI(cfg, o.Handler, log.With("component", "worker")); err != nil {
		return nil, err
	}
	if cfg.Sources.Kafka.Enabled {
		delivery := kafka.AtLeastOnce()
		if cfg.ExactlyOnce() {
			delivery = kafka.ExactlyOnce(w.Sinks)
		}
		w.Kafka = kafka.New(w.App, delivery, reg, log)
	}
	w.watchExecutor(runner)
	var services []service
	if w.Monitor != nil {
		services = append(services, service{"runtime_health", w.Monitor})
	}
	if cfg.UI.Enabled {
		if services, err = w.buildUI(ctx, &own, services); err != nil {
			return nil, err
		}
	} else {
		log.Warn("ui_disabled_no_probes", "detail", "ui.enabled is false: no /healthz, /readyz, API or flight recorder")
	}
	if cfg.Metrics.Enabled {
		w.Metrics = httpd.NewMetricsServer(cfg, reg, log.With("component", "metrics"))
		w.Metrics.Adopt(w.lns.Metrics)
		services = append(services, service{"metrics", w.Metrics})
	}
	if cfg.Sources.HTTP.Enabled {
		w.Ingress = httpd.NewIngress(cfg, w.App, reg, log.With("component", "ingress"))
		w.Ingress.Adopt(w.lns.Ingress)
	}
	w.Features = w.features()
	if w.UI != nil {
		w.UI.SetFeatures(w.Features)
	}

	// From here the lifecycle owns every part: it closes each once.
	life := worker.NewLifecycle(w.App, cfg.Worker.ShutdownTimeout.D(), log)
	for _, s := range services {
		life.Service(s.name, s.r)
	}
	if w.Ingress != nil {
		life.Intake("ingress", w.Ingress)
	}
	if w.Kafka != nil {
		life.Intake("kafka", w.Kafka)
	}
	for _, f := range own.drained {
		life.OnDrained(f)
	}
	for _, f := range own.releases {
		life.Release(f)
	}
	w.life = life
	return w, nil
}

// watchExecutor wires the executor's health into the App (readiness,
// ingress, probes) and the Kafka source's intake hold, then starts the
// pool, so that persistent children start now and /readyz reflects them.
func (w *Worker) watchExecutor(runner model.TaskRunner) {
	if hs, ok := runner.(model.ExecutorHealthSource); ok {
		hs.WatchExecutorHealth(func(h model.ExecutorHealth) {
			w.App.SetExecutorHealth(h)
			if w.Kafka != nil {
				w.Kafka.SetExecutorHold(h.State == model.ExecutorUnavailable)
			}
		})
	}
	if w.Pool != nil {
		w.Pool.Start()
	}
}

// owned is what New has built and must release on an error.
type owned struct{ drained, releases []func() }

func (o *owned) release(f func()) { o.releases = append(o.releases, f) }

func (o *owned) abandon() {
	for _, f := range o.drained {
		f()
	}
	for i := len(o.releases) - 1; i >= 0; i-- {
		o.releases[i]()
	}
}

type service struct {
	name string
	r    worker.Runner
}

// buildUI builds the parts that run only with the UI server and returns
// the services in start order, after the given ones.
func (w *Worker) buildUI(ctx context.Context, own *owned, services []service) ([]service, error) {
	cfg, log, reg := w.Config, w.Log, w.Registry
	// First in, last out: its card says "stopped" once the others have.
	w.Fleet = newRegistry(cfg, w.App, w.Cache, reg, func() string { return w.UI.Addr() }, log)
	services = append(services, service{"fleet", w.Fleet})
	if w.Kafka != nil {
		// Members whose card says stopped or unreachable hold their
		// partitions for nobody: their lag is reported.
		w.Kafka.SetLiveness(func() map[string]bool {
			live := map[string]bool{}
			for _, wk := range w.Fleet.Workers() {
				switch {
				case wk.Self:
				case wk.State == fleet.StateStarting, wk.State == fleet.StateRunning, wk.State == fleet.StateDraining:
					live[wk.Name] = true
				case wk.State == fleet.StateStopped, wk.State == fleet.StateUnreachable:
					live[wk.Name] = false
				}
			}
			return live
		})
		// The whole group's view shows other workers' paused and stalled
		// partitions as their cards last said.
		w.Kafka.SetPeerFlow(func() map[string]kafka.PartitionFlow {
			flows := map[string]kafka.PartitionFlow{}
			for _, wk := range w.Fleet.Workers() {
				if !wk.Self && wk.Load != nil && wk.Load.PartitionsPaused != nil &&
					(wk.State == fleet.StateRunning || wk.State == fleet.StateDraining || wk.State == fleet.StateStarting) {
					flows[wk.Name] = kafka.PartitionFlow{Paused: wk.Load.PartitionsPaused, Stalled: wk.Load.PartitionsStalled}
				}
			}
			return flows
		})
	}
	rec, err := recorder.Open(ctx, recorderConfig(cfg, w.App, log))
	if err != nil {
		return nil, fmt.Errorf("flight recorder: %w", err)
	}
	w.Recorder = rec
	own.release(func() { _ = rec.Close() })
	w.App.AttachRecorder(rec)
	httpd.RegisterRecorderMetrics(reg, rec)
	services = append(services, service{"recorder", rec})
	uiLog := log.With("component", "ui")
	if w.Reader, err = httpd.NewKafkaReader(cfg, uiLog); err != nil {
		return nil, err
	}
	if cfg.Sources.Kafka.Enabled && cfg.UI.RedriveEnabled {
		if w.Redrive, err = redrive.New(cfg, w.Reader, w.App, log.With("component", "redrive")); err != nil {
			return nil, err
		}
		own.release(w.Redrive.Close)
	}
	w.Trends = trends.New(reg)
	services = append(services, service{"trends", w.Trends})
	deps := httpd.UIDeps{Config: cfg, App: w.App, Gatherer: reg, Log: uiLog, Recorder: rec, Kafka: w.Reader,
		Redrive: w.Redrive, Fleet: w.Fleet, Cache: w.Cache, Runtime: w.Monitor, Throughput: w.Throughput, Trends: w.Trends,
		Pages: w.pages, ProbeDetails: w.details}
	if w.Kafka != nil {
		deps.Pause = w.Kafka
	}
	if cfg.UI.Release.Enabled {
		if w.Site, err = newSite(cfg, w.pages, w.Fleet.TrustedOrigins, log); err != nil {
			return nil, err
		}
		deps.Bundle = w.Site
		services = append(services, service{"ui_bundle", w.Site})
	}
	if w.UI, err = httpd.NewUIServer(deps); err != nil {
		return nil, err
	}
	w.UI.Adopt(w.lns.UI)
	services = append(services, service{"ui", w.UI})
	if w.Exchange, err = newExchange(cfg, w.Cache, w.Fleet, reg, log); err != nil {
		return nil, err
	}
	if w.Exchange != nil {
		services = append(services, service{"cache_exchange", w.Exchange})
	}
	return services, nil
}

// Run runs the worker until ctx ends or a component fails, then shuts it
// down and releases every part. It returns the first component error.
func (w *Worker) Run(ctx context.Context) error {
	w.Log.Info("worker_started", "worker", w.Config.Worker.Name, "cluster", w.Config.Worker.Cluster, "release", worker.Version,
		"ui", w.UIAddr(), "ingress", w.IngressAddr(), "kafka_source", w.Kafka != nil)
	err := w.life.Run(ctx)
	w.Log.Info("worker_stopped", "worker", w.Config.Worker.Name)
	return err
}

// Close releases a worker that was built but will not run. After Run it
// does nothing.
func (w *Worker) Close() { w.life.Abandon() }

// UIAddr is the UI server's bound address ("" with the UI off).
func (w *Worker) UIAddr() string {
	if w.UI == nil {
		return ""
	}
	return w.UI.Addr()
}

// IngressAddr is the HTTP ingress's bound address ("" with it off).
func (w *Worker) IngressAddr() string {
	if w.Ingress == nil {
		return ""
	}
	return w.Ingress.Addr()
}

// deliveries tells the flight recorder how many sink_delivered events
// follow an ok task of a source (none when its results go to no sink).
func deliveries(cfg *config.Config, sinks *sink.Set) func(string, *model.TaskResult) int {
	kafkaOut := cfg.Sources.Kafka.Enabled
	httpOut := cfg.Sources.HTTP.Enabled && cfg.Sources.HTTP.SinksEnabled
	return func(source string, res *model.TaskResult) int {
		if source == model.SourceKafka && kafkaOut || source == model.SourceHTTP && httpOut {
			return sinks.TargetCount(res)
		}
		return 0
	}
}
