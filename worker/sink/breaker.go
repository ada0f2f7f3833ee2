package sink

import (
	"context"
	"sync"
	"time"
)

// State is a circuit breaker state; its value is also the value of
// svc_sink_breaker_state.
type State int

// The breaker states.
const (
	Closed   State = 0
	Open     State = 1
	HalfOpen State = 2
)

// String names the state for logs, events and the API: closed, open or
// half_open.
func (s State) String() string {
	if s < Closed || s > HalfOpen {
		return "unknown"
	}
	return [...]string{"closed", "open", "half_open"}[s]
}

// Breaker is a circuit breaker around one sink: closed until threshold
// consecutive failures, then open for openTimeout, then half-open with one
// trial call, whose success closes it. While open, Acquire waits: nothing
// is dropped and the pipeline backs up into backpressure.
type Breaker struct {
	mu          sync.Mutex
	state       State
	failures    int
	threshold   int
	openTimeout time.Duration
	openedAt    time.Time
	trial       bool          // a half-open trial is out
	changed     chan struct{} // closed and replaced on every state change
	onChange    func(from, to State)
	now         func() time.Time
}

// NewBreaker returns a closed breaker. onChange, if set, is called (under no
// lock) on every transition.
func NewBreaker(threshold int, openTimeout time.Duration, onChange func(from, to State)) *Breaker {
	return &Breaker{threshold: max(1, threshold), openTimeout: openTimeout, changed: make(chan struct{}), onChange: onChange, now: time.Now}
}

// State returns the current state.
func (b *Breaker) State() State {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state
}

// Acquire waits until a call may go out: at once while closed; while open,
// until openTimeout passed and this caller wins the half-open trial. It
// returns ctx.Err() when ctx ends first.
func (b *Breaker) Acquire(ctx context.Context) error {
	for {
		ok, left, changed := b.take()
		if ok {
			return nil
		}
		var wait <-chan time.Time
		if left > 0 {
			wait = time.After(left)
		}
		select {
		case <-changed:
		case <-wait:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// TryAcquire is Acquire without waiting: false while the breaker is open
// (or its half-open trial is taken).
func (b *Breaker) TryAcquire() bool {
	ok, _, _ := b.take()
	return ok
}

// take lets a call out if one may go now; otherwise it tells how long the
// breaker stays open (0: a half-open trial is out) and the channel closed
// on its next change.
func (b *Breaker) take() (ok bool, left time.Duration, changed chan struct{}) {
	b.mu.Lock()
	switch b.state {
	case Closed:
		b.mu.Unlock()
		return true, 0, nil
	case Open:
		if left = b.openTimeout - b.now().Sub(b.openedAt); left > 0 {
			break
		}
		from := b.transition(HalfOpen)
		b.trial = true
		b.mu.Unlock()
		b.notify(from, HalfOpen)
		return true, 0, nil
	case HalfOpen:
		if !b.trial {
			b.trial = true
			b.mu.Unlock()
			return true, 0, nil
		}
	}
	changed = b.changed
	b.mu.Unlock()
	return false, left, changed
}

// Success records a call that worked: the breaker closes.
func (b *Breaker) Success() {
	b.mu.Lock()
	b.failures, b.trial = 0, false
	if b.state == Closed {
		b.mu.Unlock()
		return
	}
	from := b.transition(Closed)
	b.mu.Unlock()
	b.notify(from, Closed)
}

// Failure records a failed call: the threshold-th consecutive one while
// closed, or a failed half-open trial, opens the breaker.
func (b *Breaker) Failure() {
	b.mu.Lock()
	b.failures++
	open := (b.state == Closed && b.failures >= b.threshold) || b.state == HalfOpen
	if !open {
		b.mu.Unlock()
		return
	}
	b.trial = false
	b.openedAt = b.now()
	from := b.transition(Open)
	b.mu.Unlock()
	b.notify(from, Open)
}

// Release ends a call that says nothing about the sink's health (a record
// refused for its size, a call cancelled): a half-open trial passes to the
// next caller. Calls are not told apart: two trials at once, at worst.
func (b *Breaker) Release() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state != HalfOpen || !b.trial {
		return
	}
	b.trial = false
	close(b.changed)
	b.changed = make(chan struct{})
}

// transition sets the state and wakes waiters; the caller holds mu.
func (b *Breaker) transition(to State) State {
	from := b.state
	b.state = to
	close(b.changed)
	b.changed = make(chan struct{})
	return from
}

func (b *Breaker) notify(from, to State) {
	if b.onChange != nil && from != to {
		b.onChange(from, to)
	}
}
