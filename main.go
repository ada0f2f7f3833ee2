// Command svc is a message-processing worker: Kafka and HTTP in, an external
// executor per message, Kafka sinks and a DLQ out, with an operator UI,
// a metrics exporter and a flight recorder.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"

	"svc/httpd"
	"svc/recorder"
	"svc/worker"
	"svc/worker/config"
	"svc/worker/demo"
)

const usage = `usage: svc <command> [flags]

commands:
  run   -config FILE     run the worker (config also from $SVC_CONFIG)
  check -config FILE     validate a config and print it with secrets masked
  demo                   run a self-contained demo on 127.0.0.1
  version                print the release
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop() // a second signal now ends the process at once
	}()
	os.Exit(run(ctx, os.Args, os.Stdin, os.Stdout, os.Stderr))
}

// run dispatches a subcommand and returns the process exit code.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if filepath.Base(args[0]) == "svc-exec-demo" || (len(args) > 1 && args[1] == "exec-demo") {
		return demo.Execute(stdin, stdout, stderr, os.NewFile(3, "events"))
	}
	if len(args) < 2 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	cmd, rest := args[1], args[2:]
	var err error
	switch cmd {
	case "run":
		err = cmdRun(ctx, rest, stderr)
	case "check":
		err = cmdCheck(rest, stdout)
	case "demo":
		err = cmdDemo(ctx, rest, stdout, stderr)
	case "version":
		fmt.Fprintln(stdout, worker.Version)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
	default:
		fmt.Fprintf(stderr, "svc: unknown command %q\n%s", cmd, usage)
		return 2
	}
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(stderr, "svc %s: %v\n", cmd, err)
		}
		return 1
	}
	return 0
}

type commonFlags struct {
	config    string
	logFormat string
	logLevel  string
}

func parseFlags(name string, args []string, stderr io.Writer) (commonFlags, error) {
	var f commonFlags
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.config, "config", os.Getenv("SVC_CONFIG"), "config file (TOML)")
	fs.StringVar(&f.logFormat, "log-format", "json", "log format: json or text")
	fs.StringVar(&f.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	err := fs.Parse(args)
	return f, err
}

func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("-log-level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("-log-format %q: want json or text", format)
}

func cmdCheck(args []string, stdout io.Writer) error {
	f, err := parseFlags("check", args, stdout)
	if err != nil {
		return err
	}
	if f.config == "" {
		return errors.New("-config FILE is required")
	}
	cfg, err := config.LoadFile(f.config)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "# %s: OK (secrets masked as %q)\n", f.config, config.Mask)
	fmt.Fprint(stdout, cfg.MaskedTOML())
	return nil
}

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
	return serve(ctx, cfg, log, worker.Options{}, nil)
}

// serve builds every component, binds every socket (a bind failure is fatal
// before anything runs), runs them until ctx ends or one fails, and shuts
// down in reverse order: ingress stops accepting, in-flight tasks drain up
// to worker.shutdown_timeout. ready, if set, is called once all sockets are
// bound.
func serve(ctx context.Context, cfg *config.Config, log *slog.Logger, opts worker.Options, ready func(ui, ingress string)) error {
	reg := worker.NewRegistry()
	app, err := worker.New(cfg, log, reg, opts)
	if err != nil {
		return err
	}
	var (
		ui      *httpd.UIServer
		ingress *httpd.Ingress
		metrics *httpd.MetricsServer
		rec     *recorder.Recorder
	)
	if cfg.UI.Enabled {
		// The flight recorder runs only with the UI (spec 1.2 rule 7).
		rec, err = recorder.Open(ctx, recorderConfig(cfg, app, log))
		if err != nil {
			return fmt.Errorf("flight recorder: %w", err)
		}
		defer rec.Close()
		app.AttachRecorder(rec)
		httpd.RegisterRecorderMetrics(reg, rec)
		ui, err = httpd.NewUIServer(httpd.UIDeps{Config: cfg, App: app, Gatherer: reg, Log: log.With("component", "ui"), Recorder: rec})
		if err != nil {
			return err
		}
		if err := ui.Listen(); err != nil {
			return err
		}
	} else {
		log.Warn("ui_disabled_no_probes", "detail", "ui.enabled is false: no /healthz, /readyz, API or flight recorder")
	}
	if cfg.Sources.HTTP.Enabled {
		ingress = httpd.NewIngress(cfg, app, reg, log.With("component", "ingress"))
		if err := ingress.Listen(); err != nil {
			return err
		}
	}
	if cfg.Metrics.Enabled {
		metrics = httpd.NewMetricsServer(cfg, reg, log.With("component", "metrics"))
		if err := metrics.Listen(); err != nil {
			return err
		}
	}
	if cfg.Cache.Enabled && cfg.Storage.Dir == "" {
		log.Warn("cache_engine_disabled_no_storage_dir",
			"detail", "cache.enabled with an empty storage.dir: the handler cache is memory-only and the cache exchange is off")
	}
	var uiAddr, inAddr string
	if ui != nil {
		uiAddr = ui.Addr()
	}
	if ingress != nil {
		inAddr = ingress.Addr()
	}
	log.Info("worker_started", "worker", cfg.Worker.Name, "cluster", cfg.Worker.Cluster, "release", worker.Version,
		"ui", uiAddr, "ingress", inAddr, "kafka_source", cfg.Sources.Kafka.Enabled)
	if ready != nil {
		ready(uiAddr, inAddr)
	}
	app.State("running", map[string]any{"release": worker.Version})

	grace := cfg.Worker.ShutdownTimeout.D()
	intake, stopIntake := context.WithCancel(ctx)
	defer stopIntake()
	// The UI and metrics servers outlive intake so probes and metrics
	// answer during the drain.
	late, stopLate := context.WithCancel(context.Background())
	defer stopLate()
	var lg errgroup.Group
	watch := func(run func() error) {
		lg.Go(func() error {
			err := run()
			if err != nil {
				stopIntake()
			}
			return err
		})
	}
	if ui != nil {
		watch(func() error { return ui.Run(late, 2*time.Second) })
		watch(func() error { return rec.Run(late) })
	}
	if metrics != nil {
		watch(func() error { return metrics.Run(late) })
	}
	g, gctx := errgroup.WithContext(intake)
	if ingress != nil {
		g.Go(func() error { return ingress.Run(gctx, grace) })
	}
	g.Go(func() error { return app.Run(gctx) })
	var stopAt atomic.Int64
	context.AfterFunc(intake, func() { stopAt.Store(time.Now().UnixNano()) })
	err = g.Wait()
	app.State("draining", nil)
	// Intake has stopped (the ingress closed its listener and let requests
	// in flight finish); drain what the sources still run, then stop the rest.
	if !app.Drain(max(0, grace-time.Since(time.Unix(0, stopAt.Load())))) {
		log.Warn("drain_deadline_reached", "shutdown_timeout", grace.String())
	}
	app.Close()
	app.State("stopped", nil)
	stopLate()
	if lerr := lg.Wait(); err == nil && ctx.Err() == nil {
		err = lerr
	}
	log.Info("worker_stopped", "worker", cfg.Worker.Name)
	if ctx.Err() != nil {
		return nil
	}
	return err
}

func cmdDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	ports := demo.Ports{}
	fs.IntVar(&ports.UI, "ui-port", 8080, "UI server port (127.0.0.1)")
	fs.IntVar(&ports.Ingress, "ingress-port", 8090, "HTTP ingress port (127.0.0.1)")
	fs.IntVar(&ports.Metrics, "metrics-port", 9090, "metrics exporter port (127.0.0.1)")
	logFormat := fs.String("log-format", "text", "log format: json or text")
	if err := fs.Parse(args); err != nil {
		return err
	}
	log, err := newLogger(stderr, *logFormat, "info")
	if err != nil {
		return err
	}
	self, err := demo.Self()
	if err != nil {
		return fmt.Errorf("find own binary for the demo executor: %w", err)
	}
	dir, err := os.MkdirTemp("", "svc-demo-")
	if err != nil {
		return fmt.Errorf("create demo storage dir: %w", err)
	}
	defer os.RemoveAll(dir)
	cluster, err := demo.StartCluster()
	if err != nil {
		return err
	}
	defer cluster.Close()
	cfg := demo.Config(self, dir, ports, cluster.Brokers())
	if problems := cfg.Validate(); len(problems) > 0 {
		return &config.Error{Path: "(demo)", Problems: problems}
	}
	go func() { _ = cluster.Trickle(ctx, 2*time.Second) }()
	return serve(ctx, cfg, log, worker.Options{}, func(ui, ingress string) {
		fmt.Fprintf(stdout, `
svc demo is running (Ctrl-C to stop)
  kafka        embedded cluster at %s: demo-in -> exec-demo -> demo-out (failures -> demo-in_dlq)
               a sample message every 2s; about one in five fails into the DLQ
  UI and API   http://%s/api/v1/identity
  metrics      http://%s/metrics
  try it:      curl -s -H 'Authorization: Bearer %s' --data-binary 'hello world' http://%s/v1/process
  a failure:   curl -s -H 'Authorization: Bearer %s' --data-binary 'please fail' http://%s/v1/process

`, strings.Join(cluster.Brokers(), ","), ui, hostPort(cfg.Metrics.Host, cfg.Metrics.Port), demo.IngressToken, ingress, demo.IngressToken, ingress)
	})
}

// recorderConfig maps the worker config onto the recorder's.
func recorderConfig(cfg *config.Config, app *worker.App, log *slog.Logger) recorder.Config {
	return recorder.Config{
		Dir: cfg.Storage.Dir, SharedDir: cfg.Shared.Dir, Worker: cfg.Worker.Name, Cluster: cfg.Worker.Cluster,
		StartedAt: app.Started, SealInterval: cfg.History.SealInterval.D(),
		ArchiveEnabled: cfg.History.Archive.Enabled, ArchiveAfter: cfg.History.Archive.After.D(),
		ArchiveWindow: cfg.History.Archive.Window.D(), MergedRetentionDays: cfg.History.MergedRetentionDays,
		Logger: log,
	}
}

func hostPort(host string, port int) string { return fmt.Sprintf("%s:%d", host, port) }
