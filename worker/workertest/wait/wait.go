// Package wait is how a test waits for something to become true. It
// imports only the standard library, so every package's tests can use it.
package wait

import (
	"testing"
	"time"
)

// Long is the generous deadline for anything a test waits for.
const Long = 90 * time.Second

// maxPause is the longest sleep between two checks.
const maxPause = 50 * time.Millisecond

// For calls cond until it reports ok, and fails t (Fatalf: test goroutine
// only) when timeout passes first, with the last detail cond returned. The
// pause between checks doubles from 1ms up to maxPause.
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
