package cache_test

import (
	"context"
	"testing"

	"svc/httpd/root"
	"svc/worker/cache"
	"svc/worker/config"
)

// The bridge from this package's tests to the one builder.
func init() {
	cache.BuildWorker = func(t testing.TB, cfg *config.Config) cache.Built {
		t.Helper()
		w, err := root.New(context.Background(), cfg, root.Options{})
		if err != nil {
			t.Fatalf("root.New: %v", err)
		}
		t.Cleanup(w.Close)
		return cache.Built{App: w.App, Store: w.Cache, Registry: w.Registry}
	}
}
