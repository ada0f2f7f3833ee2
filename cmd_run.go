package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/pprof"
	"runtime/trace"
	"syscall"

	"svc/httpd/root"
	"svc/worker/config"
	"svc/worker/executor"
	"svc/worker/gcfloor"
)

func cmdRun(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f, err := parseFlags("run", args, stdout)
	if err != nil {
		return err
	}
	log, err := newLogger(stderr, f.logFormat, f.logLevel)
	if err != nil {
		return err
	}
	// Orphans of executor trees are the worker's to reap (as PID 1 too).
	defer executor.StartReaper(log)()
	defer logHangups(log)()
	// From here on a fatal error is a log line; main only sets exit 1.
	fail := func(event string, err error, attrs ...any) error {
		var cfgErr *config.Error
		if errors.As(err, &cfgErr) {
			attrs = append(attrs, "problems", cfgErr.Problems)
		}
		log.Error(event, append(attrs, "error", err.Error())...)
		return &loggedError{err}
	}
	cfg, err := root.LoadConfig(f.config)
	if err != nil {
		return fail("startup_failed", err, "config", f.config)
	}
	stop, err := startProfiles(f.cpuProfile, f.memProfile, f.traceFile)
	if err != nil {
		return fail("startup_failed", err)
	}
	defer stop()
	defer gcfloor.Start(gcfloor.MinGoal)()
	w, err := root.New(ctx, cfg, productionOptions(log))
	if err != nil {
		return fail("startup_failed", err)
	}
	if err := w.Run(ctx); err != nil {
		return fail("worker_failed", err)
	}
	return nil
}

// logHangups logs and otherwise ignores each SIGHUP: svc reads its config
// at start only and has no file to reopen.
func logHangups(log *slog.Logger) (stop func()) {
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-c:
				log.Warn("signal_ignored", "signal", "SIGHUP",
					"hint", "svc reads its config at start only: restart it to apply a change (SIGTERM drains first)")
			case <-done:
				return
			}
		}
	}()
	return func() {
		signal.Stop(c)
		close(done)
	}
}

// startProfiles starts a CPU profile and a runtime trace (each when its
// path is set) and returns the function that ends them and writes the
// allocation profile to memPath. Files are created 0600.
func startProfiles(cpuPath, memPath, tracePath string) (func(), error) {
	create := func(path string) (*os.File, error) {
		return os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	}
	var stops []func()
	stop := func() {
		for _, f := range stops {
			f()
		}
	}
	start := func(path, flag string, begin func(io.Writer) error, end func()) error {
		if path == "" {
			return nil
		}
		f, err := create(path)
		if err == nil {
			if err = begin(f); err != nil {
				f.Close()
			}
		}
		if err != nil {
			return fmt.Errorf("%s: %w", flag, err)
		}
		stops = append(stops, func() { end(); f.Close() })
		return nil
	}
	if err := start(cpuPath, "-cpuprofile", pprof.StartCPUProfile, pprof.StopCPUProfile); err != nil {
		return nil, err
	}
	if err := start(tracePath, "-trace", trace.Start, trace.Stop); err != nil {
		stop()
		return nil, err
	}
	return func() {
		stop()
		if memPath == "" {
			return
		}
		if f, err := create(memPath); err == nil {
			pprof.Lookup("allocs").WriteTo(f, 0)
			f.Close()
		}
	}, nil
}

// productionOptions are the builder options of `svc run` and `svc demo`:
// this binary is the executor guard.
func productionOptions(log *slog.Logger) root.Options {
	guard, _ := os.Executable()
	return root.Options{Log: log, GuardBinary: guard}
}
