package recorder

import (
	"os"
	"testing"

	"svc/worker/workertest"
)

// Most tests wait on the writer (its linger, the summary hold, seals and
// size checks): -short runs run more of them at once.
func TestMain(m *testing.M) {
	workertest.ShortParallel(8)
	os.Exit(m.Run())
}
