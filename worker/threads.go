package worker

import (
	"context"
	"time"
)

// Threads bounds how many calls of one kind run at once (offload.max_threads,
// io.max_threads). A call waits for a slot, then runs on the caller's
// goroutine. Safe for concurrent use.
type Threads struct {
	slots  chan struct{}
	onWait func(time.Duration)
}

// NewThreads returns a pool of n slots (at least 1); onWait, if set, gets
// each call's wait for its slot.
func NewThreads(n int, onWait func(time.Duration)) *Threads {
	return &Threads{slots: make(chan struct{}, max(1, n)), onWait: onWait}
}

// Size is the number of slots.
func (t *Threads) Size() int { return cap(t.slots) }

// Busy is the number of slots in use.
func (t *Threads) Busy() int { return len(t.slots) }

// Do runs fn once a slot is free, or returns ctx.Err() if ctx ends first.
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
