package sink

import (
	"context"
	"sync"
	"testing"
	"time"
)

func TestBreakerTransitions(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var seen []string
	b := NewBreaker(3, 500*time.Millisecond, func(from, to State) {
		mu.Lock()
		seen = append(seen, State.String(from)+">"+State.String(to))
		mu.Unlock()
	})
	ctx := t.Context()
	for range 2 {
		if err := b.Acquire(ctx); err != nil {
			t.Fatal(err)
		}
		b.Failure()
	}
	if b.State() != Closed {
		t.Fatalf("after 2 failures state = %d, want closed", b.State())
	}
	b.Success() // resets the consecutive count
	for range 3 {
		b.Failure()
	}
	if b.State() != Open {
		t.Fatalf("after 3 consecutive failures state = %d, want open", b.State())
	}
	// While open, a caller waits rather than failing.
	short, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	if err := b.Acquire(short); err == nil {
		t.Fatal("Acquire passed while the breaker was open")
	}
	// After the open timeout exactly one trial goes out.
	if err := b.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	if b.State() != HalfOpen {
		t.Fatalf("state = %d, want half-open", b.State())
	}
	second := make(chan error, 1)
	go func() { second <- b.Acquire(ctx) }()
	select {
	case <-second:
		t.Fatal("a second caller passed during the half-open trial")
	case <-time.After(30 * time.Millisecond):
	}
	b.Failure() // failed trial: open again
	if b.State() != Open {
		t.Fatalf("failed trial: state = %d, want open", b.State())
	}
	if err := <-second; err != nil { // the waiter becomes the next trial
		t.Fatal(err)
	}
	b.Success()
	if b.State() != Closed {
		t.Fatalf("successful trial: state = %d, want closed", b.State())
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{"closed>open", "open>half_open", "half_open>open", "open>half_open", "half_open>closed"}
	if len(seen) != len(want) {
		t.Fatalf("transitions = %v, want %v", seen, want)
	}
	for i := range want {
		if seen[i] != want[i] {
			t.Fatalf("transitions = %v, want %v", seen, want)
		}
	}
}

// TestBreakerRelease: a half-open trial that ends without a verdict (a
// record refused for its size, a cancelled call) passes the trial to the
// next caller and changes nothing else; without it every later caller
// waited for good.
func TestBreakerRelease(t *testing.T) {
	t.Parallel()
	b := NewBreaker(1, 10*time.Millisecond, nil)
	b.Failure()
	ctx := t.Context()
	if err := b.Acquire(ctx); err != nil || b.State() != HalfOpen {
		t.Fatalf("Acquire after the open timeout = %v in state %s, want the half-open trial", err, b.State())
	}
	next := make(chan error, 1)
	go func() { next <- b.Acquire(ctx) }()
	select {
	case <-next:
		t.Fatal("a second caller passed during the trial")
	case <-time.After(30 * time.Millisecond):
	}
	b.Release()
	select {
	case err := <-next:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the released trial did not pass to the waiting caller")
	}
	if b.State() != HalfOpen {
		t.Errorf("state after a release = %s, want half_open", b.State())
	}
	b.Success()
	b.Release() // closed: nothing to give back
	if b.State() != Closed {
		t.Errorf("state = %s, want closed", b.State())
	}
}
