package recorder

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"svc/worker/event"
)

// Subscription is one live consumer of events and task rows (for /ws, one
// per distinct subscription, shared by its sockets). Items are queued and
// taken all at once (Take) when the consumer is ready; delivery never
// blocks the recorder: an item beyond a full queue is counted in Dropped.
//
// Routine items (event.Routine, event.RoutineTask) are queued at most
// LiveRoutinePerSecond a second; the rest are counted in Sampled. Over the
// budget a task's routine events are held until its outcome is known
// (heldEvents) and queued before the event or row that tells a failure, so
// failures are never sampled away.
type Subscription struct {
	subs    *subscribers
	once    sync.Once
	ready   chan struct{} // one signal when the queue turns non-empty; closed by Close
	dropped atomic.Uint64

	mu     sync.Mutex // guards the queue and the held events below
	max    int        // bound of each queue
	events []event.Event
	tasks  []event.TaskRow
	closed bool
	held   heldEvents

	filter       atomic.Pointer[LiveFilter] // nil: everything
	tasksBudget  budget
	eventsBudget budget
	sampled      RoutineCounts // routine items not queued over the budget
	sent         RoutineCounts // routine items queued within the budget
}

// LiveFilter is what a subscriber wants: every event (Events) or those of
// EventTypes (when not nil), state events (State), task rows (Tasks).
type LiveFilter struct {
	Events     bool
	EventTypes map[string]bool
	State      bool
	Tasks      bool
}

func (f *LiveFilter) wantsEvent(e *event.Event) bool {
	return f.Events && (f.EventTypes == nil || f.EventTypes[e.Type]) || f.State && e.Type == event.TypeState
}

// Filter sets what the subscriber is sent from now on; items it does not
// want are neither queued nor budgeted. f must not change afterwards.
func (s *Subscription) Filter(f LiveFilter) {
	s.filter.Store(&f)
}

// budget is a per-second allowance of routine items.
type budget struct {
	second atomic.Int64 // unix second in use
	used   atomic.Int64 // items admitted in that second
}

// LiveRoutinePerSecond is how many routine task rows, and as many routine
// events, one subscriber is sent a second.
const LiveRoutinePerSecond = 100

// RoutineCounts counts a subscriber's routine items, task rows and events.
type RoutineCounts struct {
	Tasks, Events atomic.Uint64
}

// Sampled returns how many routine task rows and events this subscriber
// was not sent (over LiveRoutinePerSecond).
func (s *Subscription) Sampled() (tasks, events uint64) {
	return s.sampled.Tasks.Load(), s.sampled.Events.Load()
}

// SentRoutine returns how many routine task rows and events were queued
// for this subscriber.
func (s *Subscription) SentRoutine() (tasks, events uint64) {
	return s.sent.Tasks.Load(), s.sent.Events.Load()
}

// admit spends one unit of this second's budget; false when it is spent.
func (b *budget) admit(now int64) bool {
	if sec := b.second.Load(); sec != now && b.second.CompareAndSwap(sec, now) {
		b.used.Store(0)
	}
	return b.used.Add(1) <= LiveRoutinePerSecond
}

// Ready receives a signal when items were queued into an empty queue; it
// is closed by Close.
func (s *Subscription) Ready() <-chan struct{} { return s.ready }

// Take hands over everything queued, events in ID order and task rows in
// the order they finished. The slices passed in (length 0, or nil) become
// the next queue, so passing back the last ones allocates nothing. ok is
// false once the subscription is closed.
func (s *Subscription) Take(events []event.Event, tasks []event.TaskRow) (queuedEvents []event.Event, queuedTasks []event.TaskRow, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	queuedEvents, queuedTasks = s.events, s.tasks
	s.events, s.tasks = events[:0], tasks[:0]
	return queuedEvents, queuedTasks, !s.closed
}

// Dropped counts items this subscriber missed because its queue was full.
func (s *Subscription) Dropped() uint64 { return s.dropped.Load() }

// Close ends the subscription: Ready is closed and the queue released.
// Safe to call twice.
func (s *Subscription) Close() {
	s.once.Do(func() {
		s.subs.remove(s)
		s.mu.Lock()
		s.closed = true
		s.events, s.tasks, s.held = nil, nil, heldEvents{}
		close(s.ready)
		s.mu.Unlock()
	})
}

// Subscribe starts a live subscription whose queue holds at most limit
// events and limit task rows (minimum 1 each). Nothing is replayed.
func (r *Recorder) Subscribe(limit int) *Subscription {
	s := &Subscription{ready: make(chan struct{}, 1), max: max(limit, 1), subs: &r.subs}
	r.subs.add(s)
	return s
}

// subscribers is the set of live subscriptions: a list replaced whole on
// every Subscribe and Close, so publishing reads it without a lock.
type subscribers struct {
	mu    sync.Mutex // serialises add and remove
	list  atomic.Pointer[[]*Subscription]
	drops atomic.Uint64
}

func (ss *subscribers) add(s *Subscription) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	list := append(slices.Clone(ss.current()), s)
	ss.list.Store(&list)
}

func (ss *subscribers) remove(s *Subscription) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	list := slices.DeleteFunc(slices.Clone(ss.current()), func(o *Subscription) bool { return o == s })
	ss.list.Store(&list)
}

// current returns the live subscriptions (nil when none).
func (ss *subscribers) current() []*Subscription {
	if l := ss.list.Load(); l != nil {
		return *l
	}
	return nil
}

func (ss *subscribers) publishEvent(e event.Event) {
	list := ss.current()
	if len(list) == 0 {
		return
	}
	routine, now := event.Routine(&e), time.Now().Unix()
	release := !routine && e.TaskID != "" && failureEvent(&e)
	for _, s := range list {
		if !s.offerEvent(&e, routine, release, now) {
			ss.dropped(s, 1)
		}
	}
}

// offerEvent queues e for s, holds it or counts it sampled; false when the
// queue was full.
func (s *Subscription) offerEvent(e *event.Event, routine, release bool, now int64) bool {
	if f := s.filter.Load(); f != nil && !f.wantsEvent(e) {
		return true
	}
	if routine {
		if !s.eventsBudget.admit(now) {
			if e.TaskID == "" {
				s.sampled.Events.Add(1)
			} else {
				s.hold(e) // sent after all if the task fails
			}
			return true
		}
		s.sent.Events.Add(1)
	}
	if release {
		s.release(e.TaskID)
	}
	return s.queueEvent(e)
}

func (ss *subscribers) publishTask(t event.TaskRow) {
	list := ss.current()
	if len(list) == 0 {
		return
	}
	routine, now := event.RoutineTask(&t), time.Now().Unix()
	for _, s := range list {
		if !s.offerTask(&t, routine, now) {
			ss.dropped(s, 1)
		}
	}
}

// offerTask queues t for s or counts it sampled, after settling the
// events held for its task; false when the queue was full.
func (s *Subscription) offerTask(t *event.TaskRow, routine bool, now int64) bool {
	if routine {
		s.forget(t.TaskID) // its held events stay unsent: counted as sampled
	} else {
		s.release(t.TaskID) // a failed, retried or timed-out task: all its events
	}
	if f := s.filter.Load(); f != nil && !f.Tasks {
		return true
	}
	if routine {
		if !s.tasksBudget.admit(now) {
			s.sampled.Tasks.Add(1)
			return true
		}
		s.sent.Tasks.Add(1)
	}
	return s.queueTask(t)
}

// queueEvent and queueTask queue one item; false when that kind's queue is
// full. A closed subscription takes nothing and misses nothing.
func (s *Subscription) queueEvent(e *event.Event) bool { return queueItem(s, &s.events, e) }

func (s *Subscription) queueTask(t *event.TaskRow) bool { return queueItem(s, &s.tasks, t) }

// queueItem appends *v to q, one of s's queues, under s.mu.
func queueItem[T any](s *Subscription, q *[]T, v *T) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return true
	}
	if len(*q) >= s.max {
		return false
	}
	s.signal()
	*q = append(*q, *v)
	return true
}

// signal, called under mu before an item is queued, wakes the consumer
// when the queue is empty.
func (s *Subscription) signal() {
	if len(s.events) == 0 && len(s.tasks) == 0 {
		select {
		case s.ready <- struct{}{}:
		default:
		}
	}
}

func (ss *subscribers) dropped(s *Subscription, n uint64) {
	s.dropped.Add(n)
	ss.drops.Add(n)
}

func (ss *subscribers) stats() (int, uint64) {
	return len(ss.current()), ss.drops.Load()
}
