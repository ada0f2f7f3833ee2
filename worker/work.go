package worker

import (
	"sync"
	"sync/atomic"
	"time"
)

// workCount counts accepted work for the drain; unlike a sync.WaitGroup,
// work may be added while a drain waits. mu guards only zero.
type workCount struct {
	n    atomic.Int64
	mu   sync.Mutex
	zero chan struct{} // closed when n drops to 0 while someone waits
}

func (w *workCount) add() { w.n.Add(1) }

func (w *workCount) done() {
	if w.n.Add(-1) != 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	// Work added since the drop is not done: its own done closes zero.
	if w.zero != nil && w.n.Load() == 0 {
		close(w.zero)
		w.zero = nil
	}
}

// wait returns true once no work is counted, false after timeout.
func (w *workCount) wait(timeout time.Duration) bool {
	w.mu.Lock()
	if w.n.Load() == 0 {
		w.mu.Unlock()
		return true
	}
	if w.zero == nil {
		w.zero = make(chan struct{})
	}
	zero := w.zero
	w.mu.Unlock()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-zero:
		return true
	case <-t.C:
		return false
	}
}
