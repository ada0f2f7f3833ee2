package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"svc/httpd"
	"svc/recorder"
	"svc/worker"
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
	reg := worker.NewRegistry()
	events := worker.NewEvents(cfg.Worker.Name, cfg.Executor.Env)
	opts := executor.ConfigOptions(cfg)
	opts.Logger, opts.OnAttempt = log.With("component", "executor"), events.Attempt
	pool, err := executor.NewPool(opts)
	if err != nil {
		return fmt.Errorf("executor pool: %w", err)
	}
	deps := worker.Deps{Runner: pool, Events: events, Registry: reg, Log: log}
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
	var src *kafka.Source
	if cfg.Sources.Kafka.Enabled {
		src = kafka.New(app, reg, log)
	}
	var uiAddr, inAddr string
	if cfg.UI.Enabled {
		// The flight recorder runs only with the UI.
		rec, err := recorder.Open(ctx, recorderConfig(cfg, app, log))
		if err != nil {
			return fmt.Errorf("flight recorder: %w", err)
		}
		defer rec.Close()
		app.AttachRecorder(rec)
		httpd.RegisterRecorderMetrics(reg, rec)
		life.Service("recorder", rec)
		uiDeps := httpd.UIDeps{Config: cfg, App: app, Gatherer: reg, Log: log.With("component", "ui"), Recorder: rec}
		if src != nil {
			uiDeps.Pause = src
		}
		if cfg.UI.Release.Enabled {
			site, err := newSite(cfg, app, log)
			if err != nil {
				return err
			}
			uiDeps.Bundle = site
			life.Service("ui_bundle", site)
		}
		ui, err := httpd.NewUIServer(uiDeps)
		if err != nil {
			return err
		}
		if err := ui.Listen(); err != nil {
			return err
		}
		uiAddr = ui.Addr()
		life.Service("ui", ui)
	} else {
		log.Warn("ui_disabled_no_probes", "detail", "ui.enabled is false: no /healthz, /readyz, API or flight recorder")
	}
	if cfg.Metrics.Enabled {
		metrics := httpd.NewMetricsServer(cfg, reg, log.With("component", "metrics"))
		if err := metrics.Listen(); err != nil {
			return err
		}
		life.Service("metrics", metrics)
	}
	if cfg.Sources.HTTP.Enabled {
		ingress := httpd.NewIngress(cfg, app, reg, log.With("component", "ingress"))
		if err := ingress.Listen(); err != nil {
			return err
		}
		inAddr = ingress.Addr()
		life.Intake("ingress", ingress)
	}
	if src != nil {
		life.Intake("kafka", src)
	}
	if sinks != nil {
		life.OnDrained(sinks.Close)
	}
	if cfg.Cache.Enabled && cfg.Storage.Dir == "" {
		log.Warn("cache_engine_disabled_no_storage_dir",
			"detail", "cache.enabled with an empty storage.dir: the handler cache is memory-only and the cache exchange is off")
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
		Logger: log,
	}
}

func hostPort(host string, port int) string { return fmt.Sprintf("%s:%d", host, port) }
