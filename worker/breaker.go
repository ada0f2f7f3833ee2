package worker

import (
	"context"
	"sync"
	"time"
)

// Breaker states, also the values of svc_sink_breaker_state.
const (
	BreakerClosed   = 0
	BreakerOpen     = 1
	BreakerHalfOpen = 2
)

var breakerNames = [...]string{"closed", "open", "half_open"}

// Breaker is a circuit breaker around one sink: closed until threshold
// consecutive failures, then open for openTimeout, then half-open with one
// trial call; the trial's success closes it, its failure opens it again.
// While open, Acquire waits: callers are held, never refused, so nothing
// is dropped and the pipeline backs up into backpressure. Safe for
// concurrent use.
type Breaker struct {
	mu          sync.Mutex
	state       int
	failures    int
	threshold   int
	openTimeout time.Duration
	openedAt    time.Time
	trial       bool          // a half-open trial is out
	changed     chan struct{} // closed and replaced on every state change
	onChange    func(from, to int)
	now         func() time.Time
}

// NewBreaker returns a closed breaker. onChange, if set, is called (under no
// lock) on every transition.
func NewBreaker(threshold int, openTimeout time.Duration, onChange func(from, to int)) *Breaker {
	return &Breaker{threshold: max(1, threshold), openTimeout: openTimeout, changed: make(chan struct{}), onChange: onChange, now: time.Now}
}

// State returns the current state.
func (b *Breaker) State() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state
}

// Acquire waits until a call may go out: at once while closed; while open,
// until openTimeout passed and this caller wins the half-open trial. It
// returns ctx.Err() when ctx ends first.
func (b *Breaker) Acquire(ctx context.Context) error {
	for {
		b.mu.Lock()
		var wait <-chan time.Time
		switch b.state {
		case BreakerClosed:
			b.mu.Unlock()
			return nil
		case BreakerOpen:
			if left := b.openTimeout - b.now().Sub(b.openedAt); left > 0 {
				wait = time.After(left)
				break
			}
			from := b.transition(BreakerHalfOpen)
			b.trial = true
			b.mu.Unlock()
			b.notify(from, BreakerHalfOpen)
			return nil
		case BreakerHalfOpen:
			if !b.trial {
				b.trial = true
				b.mu.Unlock()
				return nil
			}
		}
		changed := b.changed
		b.mu.Unlock()
		select {
		case <-changed:
		case <-wait:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Success records a call that worked: the breaker closes.
func (b *Breaker) Success() {
	b.mu.Lock()
	b.failures, b.trial = 0, false
	if b.state == BreakerClosed {
		b.mu.Unlock()
		return
	}
	from := b.transition(BreakerClosed)
	b.mu.Unlock()
	b.notify(from, BreakerClosed)
}

// Failure records a failed call: the threshold-th consecutive one while
// closed, or a failed half-open trial, opens the breaker.
func (b *Breaker) Failure() {
	b.mu.Lock()
	b.failures++
	open := (b.state == BreakerClosed && b.failures >= b.threshold) || b.state == BreakerHalfOpen
	if !open {
		b.mu.Unlock()
		return
	}
	b.trial = false
	b.openedAt = b.now()
	from := b.transition(BreakerOpen)
	b.mu.Unlock()
	b.notify(from, BreakerOpen)
}

// transition sets the state and wakes waiters; the caller holds mu.
func (b *Breaker) transition(to int) int {
	from := b.state
	b.state = to
	close(b.changed)
	b.changed = make(chan struct{})
	return from
}

func (b *Breaker) notify(from, to int) {
	if b.onChange != nil && from != to {
		b.onChange(from, to)
	}
}

// BreakerStateName names a state for logs.
func BreakerStateName(s int) string { return breakerNames[s] }
