package sink

import (
	"os"
	"testing"
	"time"

	"svc/worker/workertest"
)

// TestMain shortens the last flush at shutdown: a test that closes a set
// in front of a hung broker waits 1 s instead of 5 (the rule, once per
// set and not per producer, is the same at any length).
//
// It also shortens limitMaxAge, so that TestRaisedLimitLearned need not
// wait 30 s for a known limit to be too old, and refreshGap, so that a
// test whose batches are refused does not wait a second per lookup of the
// topic's limit. Most tests wait on timers and brokers: -short runs run
// more of them at once.
func TestMain(m *testing.M) {
	workertest.ShortParallel(8)
	closeFlushWait = time.Second
	limitMaxAge = 300 * time.Millisecond
	refreshGap = 100 * time.Millisecond
	os.Exit(m.Run())
}
