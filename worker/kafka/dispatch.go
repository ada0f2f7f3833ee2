package kafka

import (
	"context"
	"errors"
	"fmt"
	"time"

	"svc/worker"
	"svc/worker/sink"
)

// Message workers: each started message runs in a goroutine, runs its
// tasks, hands its task slot on, delivers every result and then finishes
// its offset, which lets the next message of its key in. The goroutine
// that frees a slot runs the first message it lets in itself, and a
// goroutine left without work waits idle for a while for the next message
// to start: a fresh goroutine per message grew its stack anew for every
// task (runtime.copystack was 7.7 % of svc's CPU in the Kafka bench, 8.3 %
// again once a message's task slot was handed on before its deliveries).

// idleFor is how long a message goroutine without work waits for one
// before it exits.
const idleFor = 2 * time.Second

// job is a message to run and its hold on the worker's drain.
type job struct {
	w    *msgWork
	done func()
}

// start runs ws: each on an idle message goroutine if one waits, else on a
// new one.
func (s *Source) start(ws []*msgWork) {
	for _, w := range ws {
		j := job{w, s.app.Hold()}
		select {
		case s.idle <- j:
		default:
			go s.run(j)
		}
	}
}

// run processes j's message, then the first message its end admits, and
// so on; the others admitted on the way go to other goroutines. Out of
// work, it waits up to idleFor for more, or until the source stops.
func (s *Source) run(j job) {
	var idle *time.Timer
	w, done := j.w, j.done
	for {
		next := s.process(w)
		if len(next) > 0 {
			s.start(next[1:])
			w = next[0]
			// Held before the finished message lets go, so a drain never
			// sees a gap between the two.
			nextDone := s.app.Hold()
			done()
			done = nextDone
			continue
		}
		done()
		if idle == nil {
			idle = time.NewTimer(idleFor)
		} else {
			idle.Reset(idleFor)
		}
		select {
		case j := <-s.idle:
			w, done = j.w, j.done
		case <-idle.C:
			return
		case <-s.stopped:
			idle.Stop()
			return
		}
	}
}

// process runs a message's tasks and delivers every result; then the
// message's offset is finished (or abandoned when its partition stalled).
// The messages admitted when its tasks end start at once; it returns those
// that finishing w admitted, for the caller to start.
func (s *Source) process(w *msgWork) []*msgWork {
	stalled, unfinished := false, false
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
	// The tasks ended: the message gives its task slot to the next one
	// and delivers its results (the next message of its key still waits
	// until it is finished).
	var resultBytes int64
	for i := range results {
		resultBytes += int64(len(results[i].Output))
	}
	s.mu.Lock()
	s.executedLocked(w, resultBytes)
	admitted := s.settleLocked()
	s.mu.Unlock()
	s.start(admitted)
	if len(admitted) > 0 {
		s.signalRoom() // fewer wait: a poll held by the waiting caps may go on
	}
	if s.stager != nil {
		return s.finishStaged(w, taskCtx, results)
	}
	for i := range results {
		if (taskCtx.Err() != nil && errors.Is(results[i].Err, context.Canceled)) || errors.Is(results[i].Err, worker.ErrExecutorUnavailable) {
			// Cancelled past the drain deadline, or still waiting for an
			// unavailable executor when the drain began: not a failure of
			// the message, so no DLQ; it stays uncommitted and is
			// redelivered.
			unfinished = true
			continue
		}
		if err := s.app.Deliver(&results[i]); err != nil {
			// A DLQ send failed under "stall", or the task context ended
			// past the drain deadline: the message stays uncommitted.
			stalled = true
		}
	}
	s.mu.Lock()
	s.doneLocked(w, stalled || unfinished, !stalled)
	next := s.settleLocked(w.part)
	s.mu.Unlock()
	s.signalRoom()
	return next
}

// finishStaged finishes an exactly-once message: its results are staged
// for the next transaction and its offset finished, which lets the next
// message of its key in. A message cancelled by the shutdown or left
// waiting for an unavailable executor stays unfinished (read again).
func (s *Source) finishStaged(w *msgWork, taskCtx context.Context, results []worker.TaskResult) []*msgWork {
	unfinished := false
	for i := range results {
		if (taskCtx.Err() != nil && errors.Is(results[i].Err, context.Canceled)) || errors.Is(results[i].Err, worker.ErrExecutorUnavailable) {
			unfinished = true
		}
	}
	var staged []*sink.Staged
	if !unfinished {
		staged, unfinished = s.stageAll(taskCtx, results)
		unfinished = !unfinished
	}
	s.mu.Lock()
	if !unfinished {
		s.stageLocked(w, staged)
	}
	s.doneLocked(w, unfinished, true)
	next := s.settleLocked(w.part)
	s.mu.Unlock()
	s.signalRoom()
	return next
}

// signalRoom wakes a poll loop waiting for room, if one waits.
func (s *Source) signalRoom() {
	select {
	case s.room <- struct{}{}:
	default:
	}
}

// stallLocked stall-pauses the message's partition: its offsets freeze, its
// waiting messages are dropped and fetching stops until restart or revoke;
// neither the consume pause nor backpressure touches it. quiet (a message
// left unfinished by the shutdown) only freezes the offsets and drops the
// waiting messages: no pause, log or count.
func (s *Source) stallLocked(w *msgWork, quiet bool) {
	p := w.part
	first := !p.stalled
	p.abandon()
	s.dropWaitingLocked(p)
	if first && !quiet && !p.gone && s.app.TaskContext().Err() == nil {
		p.stallPaused = true
		s.flow.stall(p.id)
		s.m.stalled.Inc()
		s.app.Events().State("partition_stalled", map[string]any{"partition": w.msg.Partition, "offset": w.msg.Offset})
		s.log.Error("partition_stalled", "partition", w.msg.Partition, "offset", w.msg.Offset,
			"detail", "a DLQ send failed with dlq.on_send_failure = stall: the partition stays paused and uncommitted until restart or revoke")
	}
}

// runningCount is the number of messages started and not finished
// (running their tasks or delivering their results).
func (s *Source) runningCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.running
}
