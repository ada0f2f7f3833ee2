package sink

import (
	"os"
	"testing"
	"time"
)

// TestMain shortens the last flush at shutdown: a test that closes a set
// in front of a hung broker waits 1 s instead of 5 (the rule, once per
// set and not per producer, is the same at any length).
//
// It also shortens limitMaxAge, so that TestRaisedLimitLearned need not
// wait 30 s for a known limit to be too old.
func TestMain(m *testing.M) {
	closeFlushWait = time.Second
	limitMaxAge = 300 * time.Millisecond
	os.Exit(m.Run())
}
