package kafka

import (
	"context"
	"errors"
	"fmt"

	"svc/worker"
)

// worker.Message workers: each polled message runs in its own goroutine (per-key
// lanes start the next message of a key when one finishes), delivers every
// result and then finishes its offset.

func (s *Source) start(w *msgWork) {
	done := s.app.Hold()
	go func() {
		defer done()
		s.process(w)
	}()
}

// process runs a message's tasks and delivers every result; then the
// message's offset is finished (or abandoned when its partition stalled)
// and the next message of the same key starts.
func (s *Source) process(w *msgWork) {
	stalled := false
	var results []worker.TaskResult
	var runnable []worker.Task
	taskCtx := s.app.TaskContext()
	for _, t := range w.tasks {
		if w.arrangeErr != nil {
			results = append(results, worker.TaskResult{Task: &t, Status: worker.StatusFailed, Err: fmt.Errorf("arrange: %w", w.arrangeErr)})
			continue
		}
		runnable = append(runnable, t)
	}
	results = append(results, s.app.RunTasks(taskCtx, worker.SourceKafka, runnable)...)
	for i := range results {
		if taskCtx.Err() != nil && errors.Is(results[i].Err, context.Canceled) {
			// Cancelled past the drain deadline: not a failure of the
			// message, so no DLQ; it stays uncommitted and is redelivered.
			stalled = true
			continue
		}
		if err := s.app.Deliver(&results[i]); err != nil {
			if errors.Is(err, worker.ErrDeliveryStalled) {
				stalled = true
				continue
			}
			// Only a cancelled task context ends a delivery: the worker is
			// past its drain deadline and the message stays uncommitted.
			stalled = true
		}
	}
	s.mu.Lock()
	if stalled {
		s.stallLocked(w)
	} else {
		w.part.finish(w.msg.Offset)
	}
	s.inflight--
	var next *msgWork
	if w.lane != nil {
		q := s.lanes[*w.lane][1:]
		if len(q) == 0 {
			delete(s.lanes, *w.lane)
		} else {
			s.lanes[*w.lane] = q
			next = q[0]
		}
	}
	s.updateBackpressureLocked()
	s.mu.Unlock()
	select {
	case s.room <- struct{}{}:
	default:
	}
	if next != nil {
		s.start(next)
	}
}

// stallLocked stall-pauses the message's partition: its offsets freeze and
// fetching stops until restart or revoke; pause and backpressure never
// touch it.
func (s *Source) stallLocked(w *msgWork) {
	p := w.part
	first := !p.stalled
	p.abandon()
	if first && s.app.TaskContext().Err() == nil {
		s.cl.PauseFetchPartitions(map[string][]int32{s.topic: {w.msg.Partition}})
		s.m.stalled.Inc()
		s.app.Events().State("partition_stalled", map[string]any{"partition": w.msg.Partition, "offset": w.msg.Offset})
		s.log.Error("partition_stalled", "partition", w.msg.Partition, "offset", w.msg.Offset,
			"detail", "a DLQ send failed with dlq.on_send_failure = stall: the partition stays paused and uncommitted until restart or revoke")
	}
}

func (s *Source) inflightCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inflight
}

// updateBackpressureLocked holds intake (no polling, fetching paused through
// flow control) from max_in_flight in flight until fewer than half of it
// are. It also publishes the in-flight gauge, so the gauge moves on
// dispatch as well as on finish.
func (s *Source) updateBackpressureLocked() {
	s.m.inflight.Set(float64(s.inflight))
	switch {
	case s.inflight >= s.maxIn:
		s.held = true
	case s.inflight < max(1, s.maxIn/2):
		s.held = false
	}
	s.flow.setBackpressure(s.held)
}
