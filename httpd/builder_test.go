package httpd_test

import (
	"context"
	"testing"

	"svc/httpd"
	"svc/httpd/root"
	"svc/worker/config"
)

// The bridge from this package's tests to the one builder: what they
// test is the worker `svc run` builds.
func init() {
	httpd.BuildWorker = func(t testing.TB, cfg *config.Config, o httpd.BuildOptions) httpd.Built {
		t.Helper()
		w, err := root.New(context.Background(), cfg, root.Options{Log: o.Log, Runner: o.Runner})
		if err != nil {
			t.Fatalf("root.New: %v", err)
		}
		return httpd.Built{UI: w.UI, Ingress: w.Ingress, App: w.App, Recorder: w.Recorder, Registry: w.Registry, Run: w.Run, Close: w.Close}
	}
}
