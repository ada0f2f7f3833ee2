package kafka_test

import (
	"context"
	"log/slog"
	"testing"

	"svc/worker/build"
	"svc/worker/config"
	"svc/worker/kafka"
)

// The bridge from this package's tests to the one builder: what they
// test is the worker `svc run` builds.
func init() {
	kafka.BuildWorker = func(t testing.TB, cfg *config.Config, handler any, log *slog.Logger) kafka.Built {
		t.Helper()
		w, err := build.New(context.Background(), cfg, build.Options{Log: log, Handler: handler})
		if err != nil {
			t.Fatalf("build.New: %v", err)
		}
		return kafka.Built{App: w.App, Src: w.Kafka, Sinks: w.Sinks, Events: w.Events, Registry: w.Registry, Run: w.Run, Close: w.Close}
	}
}
