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
	// From here on every fatal error is a log line in the configured
	// format (a JSON log pipeline keeps it), and main only sets exit 1.
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

// logHangups logs each SIGHUP the worker gets and otherwise ignores it:
// svc reads its config at start only and keeps no file to reopen (logs go
// to stderr), so a hangup (a closed terminal, an init script's reload, a
// log rotator's habit) must neither end the worker nor pass unnoticed.
// main keeps SIGHUP from ending the process before and after this.
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

// startProfiles starts a CPU profile into cpuPath and a runtime execution
// trace into tracePath (each when set) and returns the function that ends
// them and writes the allocation profile into memPath (when set). The
// files are created 0600: a profile or trace names code paths and may hold
// symbol names from the config, never payloads.
func startProfiles(cpuPath, memPath, tracePath string) (func(), error) {
	var cpu, tr *os.File
	if cpuPath != "" {
		f, err := os.OpenFile(cpuPath, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
		if err != nil {
			return nil, fmt.Errorf("-cpuprofile: %w", err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return nil, fmt.Errorf("-cpuprofile: %w", err)
		}
		cpu = f
	}
	if tracePath != "" {
		f, err := os.OpenFile(tracePath, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
		if err == nil {
			err = trace.Start(f)
			if err != nil {
				f.Close()
			}
		}
		if err != nil {
			if cpu != nil {
				pprof.StopCPUProfile()
				cpu.Close()
			}
			return nil, fmt.Errorf("-trace: %w", err)
		}
		tr = f
	}
	return func() {
		if cpu != nil {
			pprof.StopCPUProfile()
			cpu.Close()
		}
		if tr != nil {
			trace.Stop()
			tr.Close()
		}
		if memPath != "" {
			if f, err := os.OpenFile(memPath, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600); err == nil {
				pprof.Lookup("allocs").WriteTo(f, 0)
				f.Close()
			}
		}
	}, nil
}

// productionOptions are the builder options of `svc run` and `svc demo`:
// the executor guard is this binary itself (it kills executor trees left
// by a SIGKILLed worker).
func productionOptions(log *slog.Logger) root.Options {
	guard, _ := os.Executable()
	return root.Options{Log: log, GuardBinary: guard}
}
