package recorder

import (
	"sync"
	"sync/atomic"
)

// Subscription is one live consumer of events and task rows (the /ws
// streams). Delivery never blocks the recorder: when a channel is full the
// item is skipped for this subscriber and counted in Dropped.
type Subscription struct {
	events  chan Event
	tasks   chan TaskRow
	dropped atomic.Uint64
	subs    *subscribers
	once    sync.Once
}

// Events delivers events in roughly ID order; closed by Close.
func (s *Subscription) Events() <-chan Event { return s.events }

// Tasks delivers task rows; closed by Close.
func (s *Subscription) Tasks() <-chan TaskRow { return s.tasks }

// Dropped counts items this subscriber missed because it was slow. A caller
// can compare it between reads to tell the client it skipped items.
func (s *Subscription) Dropped() uint64 { return s.dropped.Load() }

// Close ends the subscription and closes both channels. Safe to call twice.
func (s *Subscription) Close() {
	s.once.Do(func() {
		s.subs.mu.Lock()
		delete(s.subs.set, s)
		close(s.events)
		close(s.tasks)
		s.subs.mu.Unlock()
	})
}

// Subscribe starts a live subscription whose channels each buffer buf items
// (minimum 1). Items recorded before the call are not replayed.
func (r *Recorder) Subscribe(buf int) *Subscription {
	buf = max(buf, 1)
	s := &Subscription{events: make(chan Event, buf), tasks: make(chan TaskRow, buf), subs: &r.subs}
	r.subs.mu.Lock()
	if r.subs.set == nil {
		r.subs.set = map[*Subscription]struct{}{}
	}
	r.subs.set[s] = struct{}{}
	r.subs.mu.Unlock()
	return s
}

// subscribers is the set of live subscriptions. Publishing holds the read
// lock while sending so Close (write lock) never closes a channel mid-send.
type subscribers struct {
	mu    sync.RWMutex
	set   map[*Subscription]struct{}
	drops atomic.Uint64
}

func (ss *subscribers) publishEvent(e Event) {
	ss.publish(func(s *Subscription) bool { return offer(s.events, e) })
}

func (ss *subscribers) publishTask(t TaskRow) {
	ss.publish(func(s *Subscription) bool { return offer(s.tasks, t) })
}

// publish offers an item to every subscriber, counting the ones too slow
// to take it.
func (ss *subscribers) publish(send func(*Subscription) bool) {
	ss.mu.RLock()
	defer ss.mu.RUnlock()
	for s := range ss.set {
		if !send(s) {
			s.dropped.Add(1)
			ss.drops.Add(1)
		}
	}
}

// offer sends v unless ch is full.
func offer[T any](ch chan T, v T) bool {
	select {
	case ch <- v:
		return true
	default:
		return false
	}
}

// stats returns the subscriber count and total drops.
func (ss *subscribers) stats() (int, uint64) {
	ss.mu.RLock()
	defer ss.mu.RUnlock()
	return len(ss.set), ss.drops.Load()
}
