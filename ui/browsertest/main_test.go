package browsertest

import (
	"flag"
	"os"
	"testing"

	"svc/worker/workertest"
)

// svcBin is the svc binary TestMain built.
var svcBin string

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() { // TestBrowser skips: nothing to build
		os.Exit(m.Run())
	}
	os.Exit(workertest.MainWithSvc(m, &svcBin))
}

// start runs the svc binary with args, killed when the test ends.
func start(t *testing.T, args ...string) *workertest.Proc {
	t.Helper()
	return workertest.Start(t, svcBin, args...)
}
