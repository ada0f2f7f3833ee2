package httpd

import (
	"context"
	"log/slog"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"svc/recorder"
	"svc/worker"
	"svc/worker/config"
	"svc/worker/model"
)

// Built is a whole worker built by the one builder (httpd/root), as
// this package's tests see it.
type Built struct {
	UI       *UIServer // nil with ui.enabled false
	Ingress  *Ingress  // nil without the HTTP source
	App      *worker.App
	Recorder *recorder.Recorder
	Registry *prometheus.Registry
	// Run runs the worker under its lifecycle until ctx ends.
	Run func(ctx context.Context) error
	// Close releases a worker that was never run.
	Close func()
}

// BuildOptions swap parts of a test worker through the builder.
type BuildOptions struct {
	Log    *slog.Logger
	Runner model.TaskRunner // nil: the executor pool
}

// BuildWorker builds a worker with httpd/root. It is set by
// builder_test.go (package httpd_test): this package's own tests cannot
// import the builder, which imports httpd.
var BuildWorker func(t testing.TB, cfg *config.Config, o BuildOptions) Built
