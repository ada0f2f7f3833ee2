package recorder

// heldEvents are the routine events of unfinished tasks a subscriber was
// not sent over its budget (task_received, executor_started, ...), by task
// ID. A task that fails, retries or times out releases them into the queue
// (the subscriber gets every event of a failure); a task that succeeds at
// once forgets them, and they count as sampled then. Tasks whose outcome
// never comes (a shutdown, an event after the row) age out: entries live
// for two generations of heldPerGeneration tasks and count as sampled when
// dropped. So holding costs a map entry per task in flight, bounded.
type heldEvents struct {
	cur, old map[string][]Event
}

const (
	heldPerGeneration = 1024 // tasks per generation: far more than run at once (pipeline.max_in_flight)
	heldPerTask       = 16   // routine events held per task; more count as sampled at once
)

// failureEvent tells an event that makes its task a failure as far as live
// subscribers care: an executor run that did not succeed cleanly (a
// non-routine executor_finished) or a DLQ record.
func failureEvent(e *Event) bool {
	return e.Type == TypeExecutorFinished || e.Type == TypeDLQSent
}

// hold keeps e, a routine event over the budget, until its task's outcome.
func (s *Subscription) hold(e *Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := &s.held
	if s.closed {
		return
	}
	evs, ok := h.cur[e.TaskID]
	if !ok {
		if evs, ok = h.old[e.TaskID]; ok {
			delete(h.old, e.TaskID)
		}
	}
	if len(evs) >= heldPerTask {
		s.sampled.Events.Add(1)
		return
	}
	if !ok && len(h.cur) >= heldPerGeneration {
		for _, old := range h.old {
			s.sampled.Events.Add(uint64(len(old)))
		}
		h.old, h.cur = h.cur, nil
	}
	if h.cur == nil {
		h.cur = make(map[string][]Event, heldPerGeneration)
	}
	if evs == nil {
		evs = make([]Event, 0, 3) // received, started, finished: one allocation for a task's usual events
	}
	h.cur[e.TaskID] = append(evs, *e)
}

// take removes and returns the events held for task id (caller holds mu).
func (h *heldEvents) take(id string) []Event {
	evs, ok := h.cur[id]
	if ok {
		delete(h.cur, id)
	}
	if old, ok := h.old[id]; ok {
		delete(h.old, id)
		evs = append(old, evs...)
	}
	return evs
}

// forget drops the events held for a task that succeeded: they count as
// sampled.
func (s *Subscription) forget(id string) {
	s.mu.Lock()
	n := len(s.held.take(id))
	s.mu.Unlock()
	s.sampled.Events.Add(uint64(n))
}

// release queues the events held for a task that failed, oldest first;
// the ones the full queue cannot take are dropped and counted.
func (s *Subscription) release(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	evs := s.held.take(id)
	if len(evs) == 0 || s.closed {
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
	if dropped > 0 {
		s.subs.dropped(s, dropped)
	}
}
