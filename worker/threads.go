package worker

import (
	"context"
	"time"
)

// Threads bounds how many calls of one kind of work run at once: the offload
// pool (offload.max_threads) for CPU-bound hook work such as arrange and
// complete, and the blocking-I/O pool (io.max_threads) for file reads and
// writes done on behalf of requests. A call waits for a free slot (or for its
// context) and then runs on the caller's goroutine, so nothing is queued
// without bound and no goroutine outlives its caller. Safe for concurrent use.
type Threads struct {
	slots  chan struct{}
	onWait func(time.Duration)
}

// NewThreads returns a pool of n slots (n < 1 counts as 1). onWait, if
// set, is told how long each call waited for its slot.
func NewThreads(n int, onWait func(time.Duration)) *Threads {
	return &Threads{slots: make(chan struct{}, max(1, n)), onWait: onWait}
}

// Size is the number of slots.
func (t *Threads) Size() int { return cap(t.slots) }

// Busy is the number of slots in use.
func (t *Threads) Busy() int { return len(t.slots) }

// Do runs fn once a slot is free. It returns ctx.Err() without running fn
// when the context ends first.
func (t *Threads) Do(ctx context.Context, fn func()) error {
	start := time.Now()
	select {
	case t.slots <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	if t.onWait != nil {
		t.onWait(time.Since(start))
	}
	defer func() { <-t.slots }()
	fn()
	return nil
}

// Call runs fn on t and returns its result.
func Call[T any](ctx context.Context, t *Threads, fn func() (T, error)) (T, error) {
	var (
		v   T
		err error
	)
	if derr := t.Do(ctx, func() { v, err = fn() }); derr != nil {
		return v, derr
	}
	return v, err
}
