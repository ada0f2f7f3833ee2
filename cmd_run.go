package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"

	"svc/worker/build"
	"svc/worker/config"
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
	w, err := build.New(ctx, cfg, productionOptions(log))
	if err != nil {
		return err
	}
	return w.Run(ctx)
}

// productionOptions are the builder options of `svc run` and `svc demo`:
// the executor guard is this binary itself (it kills executor trees left
// by a SIGKILLed worker).
func productionOptions(log *slog.Logger) build.Options {
	guard, _ := os.Executable()
	return build.Options{Log: log, GuardBinary: guard}
}
