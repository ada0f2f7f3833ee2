package executor

import (
	"context"
	"sync"
	"time"
)

// runWatch ends a child's task that runs past executor.timeout or whose
// context ends, by marking the child down and killing it. One per child:
// its timer is reset per task, and a context shared by tasks (the Kafka
// path's) is watched once while tasks keep coming with it, rather than
// registered and removed under that context's lock for every task.
type runWatch struct {
	p *persistent
	c *child

	mu       sync.Mutex
	armed    bool
	why      string    // the first stop reason of the armed task
	deadline time.Time // the armed task's timeout
	timer    *time.Timer
	ctx      context.Context // the context watched
	unwatch  func() bool
}

// arm starts watching a task run under ctx.
func (w *runWatch) arm(ctx context.Context, timeout time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.armed, w.why = true, ""
	w.deadline = time.Now().Add(timeout)
	if w.timer == nil {
		w.timer = time.AfterFunc(timeout, w.onTimeout)
	} else {
		w.timer.Reset(timeout)
	}
	if ctx != w.ctx {
		if w.unwatch != nil {
			w.unwatch()
		}
		w.ctx, w.unwatch = ctx, context.AfterFunc(ctx, w.onCancel)
	} else if ctx.Err() != nil { // its watch fired between two tasks
		w.stopLocked(reasonCanceled)
	}
}

// disarm stops watching and returns the reason the task was stopped for
// ("" when it was not).
func (w *runWatch) disarm() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.armed = false
	w.timer.Stop()
	return w.why
}

// release lets the watched context go (the child leaves service).
func (w *runWatch) release() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.unwatch != nil {
		w.unwatch()
		w.ctx, w.unwatch = nil, nil
	}
	if w.timer != nil {
		w.timer.Stop()
	}
}

// onTimeout is the timer's. A late call for an earlier task is told apart
// by the deadline: a timer never fires before its own.
func (w *runWatch) onTimeout() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.armed && !time.Now().Before(w.deadline) {
		w.stopLocked(reasonTimeout)
	}
}

// onCancel stops the armed task; one armed later under the same context
// stops at arm.
func (w *runWatch) onCancel() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.armed {
		w.stopLocked(reasonCanceled)
	}
}

func (w *runWatch) stopLocked(reason string) {
	if w.why != "" {
		return
	}
	w.why = reason
	w.p.markDown(w.c, reason)
}
