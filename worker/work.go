package worker

import (
	"sync"
	"time"
)

// workCount counts accepted work for the drain. Unlike a sync.WaitGroup,
// work may be added while a drain waits (a probe racing the shutdown, the
// next message of a key lane), so add never races wait.
type workCount struct {
	mu   sync.Mutex
	n    int
	zero chan struct{} // closed when n drops to 0 while someone waits
}

func (w *workCount) add() {
	w.mu.Lock()
	w.n++
	w.mu.Unlock()
}

func (w *workCount) done() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.n--
	if w.n == 0 && w.zero != nil {
		close(w.zero)
		w.zero = nil
	}
}

// wait returns true once no work is counted, false after timeout.
func (w *workCount) wait(timeout time.Duration) bool {
	w.mu.Lock()
	if w.n == 0 {
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
