package kafka_test

import (
	"context"
	"log/slog"
	"testing"

	"svc/httpd/root"
	"svc/worker/config"
	"svc/worker/kafka"
)

// The bridge from this package's tests to the one builder: what they
// test is the worker `svc run` builds.
func init() {
	kafka.BuildWorker = func(t testing.TB, cfg *config.Config, handler any, log *slog.Logger) kafka.Built {
		t.Helper()
		w, err := root.New(context.Background(), cfg, root.Options{Log: log, Handler: handler})
		if err != nil {
			t.Fatalf("root.New: %v", err)
		}
		return kafka.Built{App: w.App, Src: w.Kafka, Sinks: w.Sinks, Events: w.Events, Registry: w.Registry, Run: w.Run, Close: w.Close}
	}
}
