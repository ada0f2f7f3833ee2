package cache

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"svc/worker"
	"svc/worker/config"
)

// Built is the part of a whole worker (built by httpd/root) that this
// package's tests use.
type Built struct {
	App      *worker.App
	Store    *Store
	Registry *prometheus.Registry
}

// BuildWorker builds a worker with httpd/root; it is released when the
// test ends. It is set by builder_test.go (package cache_test): this
// package's own tests cannot import the builder, which imports cache.
var BuildWorker func(t testing.TB, cfg *config.Config) Built
