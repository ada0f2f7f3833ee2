package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"

	"svc/httpd"
	"svc/recorder"
	"svc/worker"
	"svc/worker/cache"
	"svc/worker/config"
	"svc/worker/executor"
	"svc/worker/kafka"
	"svc/worker/sink"
)

func cmdRun(ctx context.Context, args []string, stderr io.Writer) error {
	f, err := parseFlags("run", args, stderr)
	if err != nil {
		return err
	}
	if f.config == "" {
		return errors.New("-config FILE (or SVC_CONFIG) is required")
	}
	log, err := newLogger(stderr, f.logFormat, f.logLevel)
	if err != nil {
		return err
	}
	cfg, err := config.LoadFile(f.config)
	if err != nil {
		return err
	}
	return serve(ctx, cfg, log, nil)
}

// serve builds every component, binds every socket (a bind failure is
// fatal before anything runs) and runs them under the worker's lifecycle
// until ctx ends or one fails. ready, if set, is called once all sockets
// are bound, with the UI and ingress addresses.
func serve(ctx context.Context, cfg *config.Config, log *slog.Logger, ready func(ui, ingress string)) error {
	lns, err := httpd.Bind(cfg)
	if err != nil {
		return err
	}
	defer lns.Close()
	reg := worker.NewRegistry()
	events := worker.NewEvents(cfg.Worker.Name, cfg.Executor.Env)
	opts := executor.ConfigOptions(cfg)
	opts.Logger, opts.OnAttempt, opts.Registerer = log.With("component", "executor"), events.Attempt, reg
	opts.GuardBinary, _ = os.Executable() // kills executor trees left by a SIGKILLed worker
	pool, err := executor.NewPool(opts)
	if err != nil {
		return fmt.Errorf("executor pool: %w", err)
	}
	defer pool.Close()
	monitor, tracker, err := newMonitors(cfg, events, pool, reg, log)
	if err != nil {
		return err
	}
	deps := worker.Deps{Runner: pool, Events: events, Registry: reg, Log: log}
	if tracker.Enabled() {
		deps.Cost = tracker
	}
	store, err := openCache(ctx, cfg, reg, log)
	if err != nil {
		return err
	}
	if store != nil {
		defer store.Close()
		deps.Cache = cache.NewTasks(store, cfg.Handler.CacheKeys)
	}
	var sinks *sink.Set
	if cfg.SinksRequired() || cfg.DLQTopic() != "" {
		if sinks, err = sink.New(cfg, reg, events, log.With("component", "sinks")); err != nil {
			return err
		}
		defer sinks.Close()
		deps.Sinks = sinks
	}
	app, err := worker.New(cfg, deps)
	if err != nil {
		return err
	}
	life := worker.NewLifecycle(app, cfg.Worker.ShutdownTimeout.D(), log)
	if monitor != nil {
		life.Service("runtime_health", monitor)
	}
	var src *kafka.Source
	if cfg.Sources.Kafka.Enabled {
		src = kafka.New(app, reg, log)
	}
	var uiAddr, inAddr string
	if cfg.UI.Enabled {
		var ui *httpd.UIServer
		// Registered first, the registry stops last: the card says
		// "stopped" once everything else has.
		registry := newRegistry(cfg, app, store, func() string { return ui.Addr() }, log)
		life.Service("fleet", registry)
		// The flight recorder runs only with the UI.
		rec, err := recorder.Open(ctx, recorderConfig(cfg, app, log))
		if err != nil {
			return fmt.Errorf("flight recorder: %w", err)
		}
		defer rec.Close()
		app.AttachRecorder(rec)
		httpd.RegisterRecorderMetrics(reg, rec)
		life.Service("recorder", rec)
		reader, err := httpd.NewKafkaReader(cfg, log.With("component", "ui"))
		if err != nil {
			return err
		}
		uiDeps := httpd.UIDeps{Config: cfg, App: app, Gatherer: reg, Log: log.With("component", "ui"), Recorder: rec, Kafka: reader,
			Fleet: registry, Cache: store, Runtime: monitor, Throughput: tracker}
		if src != nil {
			uiDeps.Pause = src
		}
		if cfg.UI.Release.Enabled {
			site, err := newSite(cfg, app, registry.URLs, log)
			if err != nil {
				return err
			}
			uiDeps.Bundle = site
			life.Service("ui_bundle", site)
		}
		ui, err = httpd.NewUIServer(uiDeps)
		if err != nil {
			return err
		}
		ui.Adopt(lns.UI)
		uiAddr = ui.Addr()
		life.Service("ui", ui)
		exchange, err := newExchange(cfg, store, registry, reg, log)
		if err != nil {
			return err
		}
		if exchange != nil {
			life.Service("cache_exchange", exchange)
		}
	} else {
		log.Warn("ui_disabled_no_probes", "detail", "ui.enabled is false: no /healthz, /readyz, API or flight recorder")
	}
	if cfg.Metrics.Enabled {
		metrics := httpd.NewMetricsServer(cfg, reg, log.With("component", "metrics"))
		metrics.Adopt(lns.Metrics)
		life.Service("metrics", metrics)
	}
	if cfg.Sources.HTTP.Enabled {
		ingress := httpd.NewIngress(cfg, app, reg, log.With("component", "ingress"))
		ingress.Adopt(lns.Ingress)
		inAddr = ingress.Addr()
		life.Intake("ingress", ingress)
	}
	if src != nil {
		life.Intake("kafka", src)
	}
	if sinks != nil {
		life.OnDrained(sinks.Close)
	}
	log.Info("worker_started", "worker", cfg.Worker.Name, "cluster", cfg.Worker.Cluster, "release", worker.Version,
		"ui", uiAddr, "ingress", inAddr, "kafka_source", cfg.Sources.Kafka.Enabled)
	if ready != nil {
		ready(uiAddr, inAddr)
	}
	err = life.Run(ctx)
	log.Info("worker_stopped", "worker", cfg.Worker.Name)
	return err
}

// recorderConfig maps the worker config onto the recorder's.
func recorderConfig(cfg *config.Config, app *worker.App, log *slog.Logger) recorder.Config {
	return recorder.Config{
		Dir: cfg.Storage.Dir, SharedDir: cfg.Shared.Dir, Worker: cfg.Worker.Name, Cluster: cfg.Worker.Cluster,
		StartedAt: app.Started(), SealInterval: cfg.History.SealInterval.D(),
		ArchiveEnabled: cfg.History.Archive.Enabled, ArchiveAfter: cfg.History.Archive.After.D(),
		ArchiveWindow: cfg.History.Archive.Window.D(), MergedRetentionDays: cfg.History.MergedRetentionDays,
		MaskEnv: config.MaskEnv, Logger: log,
	}
}

func hostPort(host string, port int) string { return fmt.Sprintf("%s:%d", host, port) }
