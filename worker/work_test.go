package worker

import (
	"sync"
	"testing"
	"time"
)

// TestWorkCountWaitsForEveryHold: the drain's wait returns true at once
// with nothing held, false while work is held, and true as soon as the
// last of many concurrent holds is let go, never before.
func TestWorkCountWaitsForEveryHold(t *testing.T) {
	var w workCount
	if !w.wait(time.Millisecond) {
		t.Fatal("wait with nothing held = false")
	}
	w.add()
	if w.wait(20 * time.Millisecond) {
		t.Fatal("wait with one hold = true")
	}
	w.done()
	if !w.wait(time.Second) {
		t.Fatal("wait after the hold ended = false")
	}

	const n = 200
	for range n {
		w.add()
	}
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			time.Sleep(time.Duration(i%20) * time.Millisecond)
			// A hold taken before the last one lets go, as the next
			// message of a key is: the count never drops to zero between.
			w.add()
			w.done()
			w.done()
		})
	}
	if !w.wait(10 * time.Second) {
		t.Fatal("wait did not see the last hold end")
	}
	if got := w.n.Load(); got != 0 {
		t.Fatalf("wait returned with %d holds left", got)
	}
	wg.Wait()
}
