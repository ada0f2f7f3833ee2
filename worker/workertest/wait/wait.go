// Package wait is how a test waits for something to become true: For
// polls a condition until it holds or a deadline passes, and fails the
// test naming what it waited for, for how long and the last state it saw.
// The specific waits of the test suites (waitWritten, Proc.WaitHTTP, a
// browser page's waitFor...) are thin wrappers around For.
//
// It imports only the standard library, so the tests of every package,
// the leaves (recorder, kafkaread, ui) included, can use it without
// pulling in the worker.
package wait

import (
	"testing"
	"time"
)

// Long is the generous deadline for anything a test waits for; tests never
// assert how fast something happens, so it only bounds a broken run.
const Long = 90 * time.Second

// maxPause is the longest sleep between two checks.
const maxPause = 50 * time.Millisecond

// For calls cond until it reports ok, and fails t (Fatalf, so from the
// test's goroutine only) when timeout passes first. The detail cond returns
// describes the state it saw, for the failure message; "" when there is
// nothing to add. The first checks follow each other within a millisecond
// and the pause doubles up to 50ms, so a quick condition ends the wait at
// once and a slow one is not polled in a busy loop.
func For(t testing.TB, timeout time.Duration, what string, cond func() (ok bool, detail string)) {
	t.Helper()
	start := time.Now()
	pause := time.Millisecond
	for checks := 1; ; checks++ {
		ok, detail := cond()
		if ok {
			return
		}
		if waited := time.Since(start); waited >= timeout {
			if detail == "" {
				detail = "no detail"
			}
			t.Fatalf("gave up after %s (%d checks) waiting for %s; last: %s", waited.Round(time.Millisecond), checks, what, detail)
			return
		}
		time.Sleep(pause)
		pause = min(2*pause, maxPause)
	}
}
