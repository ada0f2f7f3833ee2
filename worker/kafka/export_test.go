package kafka

import (
	"context"
	"log/slog"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"svc/worker"
	"svc/worker/config"
	"svc/worker/model"
	"svc/worker/sink"
)

// Built is a whole worker built by the one builder (httpd/root), as
// this package's tests see it.
type Built struct {
	App      *worker.App
	Src      *Source // nil with the Kafka source off
	Sinks    *sink.Set
	Events   *model.Events
	Registry *prometheus.Registry
	// Run runs the worker under its lifecycle until ctx ends.
	Run func(ctx context.Context) error
	// Close releases a worker that was never run.
	Close func()
}

// BuildWorker builds a worker with httpd/root (handler nil: the exec
// handler). It is set by builder_test.go (package kafka_test): this
// package's own tests cannot import the builder, which imports kafka.
var BuildWorker func(t testing.TB, cfg *config.Config, handler any, log *slog.Logger) Built
