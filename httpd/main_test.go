package httpd

import (
	"os"
	"testing"

	"svc/worker/demo"
	"svc/worker/workertest"
)

// The test binary doubles as the sample executor (`svc exec-demo`, both
// protocols), for tests that need a persistent executor.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "exec-demo" {
		os.Exit(demo.Execute(os.Stdin, os.Stdout, os.Stderr, os.NewFile(3, "events")))
	}
	// Most tests wait on a worker (startup, ticks, sockets): -short runs
	// run more of them at once.
	workertest.ShortParallel(8)
	os.Exit(m.Run())
}
