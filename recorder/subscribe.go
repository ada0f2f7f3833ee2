package recorder

import (
	"bytes"
	"sync"
	"sync/atomic"
	"time"
)

// Subscription is one live consumer of events and task rows (the /ws
// streams). Delivery never blocks the recorder: when a channel is full the
// item is skipped for this subscriber and counted in Dropped.
//
// Routine items (see routineEvent, routineTask: the task rows and
// lifecycle events of successful tasks) are sent at most
// LiveRoutinePerSecond a second per subscriber; the rest of a second's
// routine items are counted in Sampled, not sent. Failures, annotations,
// DLQ records and worker events are always sent. So a subscriber costs the
// pipeline a bounded amount whatever the task rate, and no browser is asked
// to draw 20,000 rows a second.
type Subscription struct {
	events  chan Event
	tasks   chan TaskRow
	dropped atomic.Uint64
	subs    *subscribers
	once    sync.Once

	filter       atomic.Pointer[subFilter] // nil: everything
	tasksBudget  budget
	eventsBudget budget
	sampled      SampledCounts // routine items not sent over the budget
}

// subFilter is what a subscriber wants: events for which events returns
// true (none when nil), task rows when tasks.
type subFilter struct {
	events func(*Event) bool
	tasks  bool
}

// Filter sets what the subscriber is sent from now on; items it does not
// want are neither queued nor counted against its routine budget.
func (s *Subscription) Filter(events func(*Event) bool, tasks bool) {
	s.filter.Store(&subFilter{events: events, tasks: tasks})
}

// budget is a per-second allowance of routine items.
type budget struct {
	second atomic.Int64 // unix second in use
	used   atomic.Int64 // items admitted in that second
}

// LiveRoutinePerSecond is how many routine task rows, and as many routine
// events, one subscriber is sent a second.
const LiveRoutinePerSecond = 100

// SampledCounts counts the routine items a subscriber was not sent.
type SampledCounts struct {
	Tasks, Events atomic.Uint64
}

// Sampled returns how many routine task rows and events this subscriber
// was not sent since it subscribed (over LiveRoutinePerSecond).
func (s *Subscription) Sampled() (tasks, events uint64) {
	return s.sampled.Tasks.Load(), s.sampled.Events.Load()
}

// admit spends one unit of this second's budget; false when it is spent.
func (b *budget) admit(now int64) bool {
	if sec := b.second.Load(); sec != now && b.second.CompareAndSwap(sec, now) {
		b.used.Store(0)
	}
	return b.used.Add(1) <= LiveRoutinePerSecond
}

// routineEvent tells the events of successful work, which a subscriber
// may be sampled out of.
func routineEvent(e *Event) bool {
	switch e.Type {
	case TypeTaskReceived, TypeExecutorStarted, TypeSinkDelivered, TypeOffsetCommitted:
		return true
	case TypeExecutorFinished:
		return bytes.Contains(e.Payload, []byte(`"status":"ok"`)) && !bytes.Contains(e.Payload, []byte(`"stderr_tail":`))
	case TypeRuntimeHealth:
		return e.Kind == "sample"
	}
	return false
}

// routineTask tells a successful task's row (probes are never routine).
func routineTask(t *TaskRow) bool { return t.Status == "ok" && t.Source != "probe" }

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
		s.subs.n.Store(int32(len(s.subs.set)))
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
	r.subs.n.Store(int32(len(r.subs.set)))
	r.subs.mu.Unlock()
	return s
}

// subscribers is the set of live subscriptions. Publishing holds the read
// lock while sending so Close (write lock) never closes a channel mid-send.
type subscribers struct {
	mu    sync.RWMutex
	set   map[*Subscription]struct{}
	n     atomic.Int32 // len(set), read without the lock on every publish
	drops atomic.Uint64
}

func (ss *subscribers) publishEvent(e Event) {
	if ss.n.Load() == 0 {
		return
	}
	routine, now := routineEvent(&e), time.Now().Unix()
	ss.publish(func(s *Subscription) bool {
		if f := s.filter.Load(); f != nil && (f.events == nil || !f.events(&e)) {
			return true
		}
		if routine && !s.eventsBudget.admit(now) {
			s.sampled.Events.Add(1)
			return true
		}
		return offer(s.events, e)
	})
}

func (ss *subscribers) publishTask(t TaskRow) {
	if ss.n.Load() == 0 {
		return
	}
	routine, now := routineTask(&t), time.Now().Unix()
	ss.publish(func(s *Subscription) bool {
		if f := s.filter.Load(); f != nil && !f.tasks {
			return true
		}
		if routine && !s.tasksBudget.admit(now) {
			s.sampled.Tasks.Add(1)
			return true
		}
		return offer(s.tasks, t)
	})
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
