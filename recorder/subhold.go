package recorder

import "svc/worker/event"

// heldEvents are the routine events of unfinished tasks a subscriber was
// not sent over its budget, by task ID. A task that fails, retries or
// times out releases them into the queue; one that succeeds forgets them
// (counted as sampled). Tasks whose outcome never comes age out of a
// bounded ring, entries reused, so holding allocates nothing in a flood.
type heldEvents struct {
	tasks map[string]*heldTask
	order []string // ring of task IDs in the order first held
	next  int      // ring slot written next
	free  []*heldTask
}

// heldTask is one task's held events; entries are reused.
type heldTask struct{ evs []event.Event }

const (
	// heldTasks bounds the tasks held: past it the oldest held task's
	// events count as sampled (its failure and row still reach the
	// subscriber).
	heldTasks   = 2048
	heldPerTask = 16 // routine events held per task; more count as sampled at once
)

// failureEvent tells an event that makes its task a failure for live
// subscribers: a non-routine executor_finished or a DLQ record.
func failureEvent(e *event.Event) bool {
	return e.Type == event.TypeExecutorFinished || e.Type == event.TypeDLQSent
}

// hold keeps e, a routine event over the budget, until its task's outcome.
func (s *Subscription) hold(e *event.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	h := &s.held
	ht := h.tasks[e.TaskID]
	if ht == nil {
		if h.tasks == nil {
			h.tasks, h.order = make(map[string]*heldTask, heldTasks), make([]string, heldTasks)
		}
		if old := h.order[h.next]; old != "" { // the oldest task held: its outcome is not coming
			if evs := h.take(old); len(evs) > 0 {
				s.sampled.Events.Add(uint64(len(evs)))
				h.recycle(old, evs)
			}
		}
		h.order[h.next] = e.TaskID
		h.next = (h.next + 1) % heldTasks
		if n := len(h.free); n > 0 {
			ht, h.free = h.free[n-1], h.free[:n-1]
		} else {
			ht = &heldTask{evs: make([]event.Event, 0, 3)} // received, started, finished
		}
		h.tasks[e.TaskID] = ht
	}
	if len(ht.evs) >= heldPerTask {
		s.sampled.Events.Add(1)
		return
	}
	ht.evs = append(ht.evs, *e)
}

// take returns the events held for task id, or nil; the caller hands them
// back with recycle once copied (caller holds mu).
func (h *heldEvents) take(id string) []event.Event {
	if ht := h.tasks[id]; ht != nil {
		return ht.evs
	}
	return nil
}

// recycle removes task id, whose events evs are, keeping its entry.
func (h *heldEvents) recycle(id string, evs []event.Event) {
	ht := h.tasks[id]
	delete(h.tasks, id)
	clear(evs) // drop the payloads' references
	ht.evs = evs[:0]
	h.free = append(h.free, ht)
}

// forget drops the events held for a task that succeeded (sampled).
func (s *Subscription) forget(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if evs := s.held.take(id); evs != nil {
		s.sampled.Events.Add(uint64(len(evs)))
		s.held.recycle(id, evs)
	}
}

// release queues the events held for a failed task, oldest first; those
// the full queue cannot take are dropped and counted.
func (s *Subscription) release(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	evs := s.held.take(id)
	if evs == nil || s.closed {
		return
	}
	var dropped uint64
	for i := range evs {
		if len(s.events) >= s.max {
			dropped++
			continue
		}
		s.signal()
		s.events = append(s.events, evs[i])
	}
	s.held.recycle(id, evs)
	if dropped > 0 {
		s.subs.dropped(s, dropped)
	}
}
