package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/pprof"
	"runtime/trace"

	"svc/worker/build"
	"svc/worker/config"
	"svc/worker/executor"
	"svc/worker/gcfloor"
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
	// Orphans of executor trees are the worker's to reap (as PID 1 too).
	defer executor.StartReaper(log)()
	cfg, err := config.LoadFile(f.config)
	if err != nil {
		return err
	}
	stop, err := startProfiles(f.cpuProfile, f.memProfile, f.traceFile)
	if err != nil {
		return err
	}
	defer stop()
	defer gcfloor.Start(gcfloor.MinGoal)()
	w, err := build.New(ctx, cfg, productionOptions(log))
	if err != nil {
		return err
	}
	return w.Run(ctx)
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
func productionOptions(log *slog.Logger) build.Options {
	guard, _ := os.Executable()
	return build.Options{Log: log, GuardBinary: guard}
}
