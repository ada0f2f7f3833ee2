package kafka

import (
	"context"
	"errors"
	"fmt"
	"time"

	"svc/worker/model"
)

// Message workers: each started message runs on a goroutine, runs its
// tasks, hands its task slot on and delivers its results. The goroutine
// whose message leaves its task slot runs the first message that lets in
// itself, so the executor's queue is fed by the goroutines that just used
// it rather than by goroutines woken for it, and an idle goroutine waits a
// while for the next message instead of exiting: a fresh goroutine per
// message grew its stack anew each time (7.7 % of CPU in the Kafka bench).

// idleFor is how long a message goroutine without work waits for one
// before it exits.
const idleFor = 2 * time.Second

// job is a message to run and its hold on the worker's drain.
type job struct {
	w    *msgWork
	done func()
}

// jobs holds the worker's drain for each of ws, before whatever admitted
// them lets its own hold go, so a drain never sees a gap.
func (s *Source) jobs(ws []*msgWork) []job {
	if len(ws) == 0 {
		return nil
	}
	js := make([]job, len(ws))
	for i, w := range ws {
		js[i] = job{w, s.app.Hold()}
	}
	return js
}

// start runs each of js on an idle message goroutine, else on a new one.
func (s *Source) start(js []job) {
	for _, j := range js {
		select {
		case s.idle <- j:
		default:
			go s.run(j)
		}
	}
}

// run processes j's message, then the first message its tasks' end
// admits, and so on. Out of work, it waits up to idleFor for more.
func (s *Source) run(j job) {
	var idle *time.Timer
	for {
		next := s.process(j)
		if len(next) > 0 {
			s.start(next[1:])
			j = next[0]
			continue
		}
		if idle == nil {
			idle = time.NewTimer(idleFor)
		} else {
			idle.Reset(idleFor)
		}
		select {
		case j = <-s.idle:
		case <-idle.C:
			return
		case <-s.stopped:
			idle.Stop()
			return
		}
	}
}

// process runs a message's tasks and hands the results to the committer.
// It returns the messages admitted meanwhile, held, for the caller to run.
func (s *Source) process(j job) []job {
	w := j.w
	var results []model.TaskResult
	taskCtx := s.app.TaskContext()
	if w.arrangeErr != nil { // every task fails unrun (to the DLQ)
		for i := range w.tasks {
			results = append(results, model.TaskResult{Task: &w.tasks[i], Status: model.StatusFailed, Err: fmt.Errorf("arrange: %w", w.arrangeErr)})
		}
	} else {
		results = s.app.RunTasks(taskCtx, model.SourceKafka, w.tasks) // the message's own tasks: nothing else uses them
	}
	// The tasks ended: the task slot goes to the next message (the next
	// of its key still waits until this one is finished).
	var resultBytes int64
	for i := range results {
		resultBytes += int64(len(results[i].Output))
	}
	s.mu.Lock()
	s.executedLocked(w, resultBytes)
	next := s.jobs(s.settleLocked())
	wake := len(next) > 0 && s.pollWakeLocked() // fewer wait: a poll held by the waiting caps may go on
	s.mu.Unlock()
	if wake {
		s.signalRoom()
	}
	return append(next, s.c.finished(j, taskCtx, results)...)
}

// notRun reports a result that is not the message's outcome: cancelled
// past the drain deadline, or still waiting for an unavailable executor
// when the drain began. Its message stays uncommitted (read again), with
// no DLQ.
func notRun(taskCtx context.Context, r *model.TaskResult) bool {
	return (taskCtx.Err() != nil && errors.Is(r.Err, context.Canceled)) || errors.Is(r.Err, model.ErrExecutorUnavailable)
}

// pollWakeLocked reports whether a finished message should wake the poll
// loop: the next poll may take records, a transaction may be due, or
// nothing runs any more (the shutdown drain). Woken while backpressure
// holds, it would only wait again (TestKafkaBackpressureQuietPoll).
func (s *Source) pollWakeLocked() bool {
	return s.c.transactional() || s.running == 0 || s.pollRoomLocked() > 0
}

// signalRoom wakes a poll loop waiting for room, if one waits.
func (s *Source) signalRoom() {
	select {
	case s.room <- struct{}{}:
	default:
	}
}

// stallLocked stall-pauses the message's partition until restart or
// revoke: offsets frozen, waiting messages dropped, fetching stopped.
// quiet (a message the shutdown left unfinished): no pause, log or count.
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

// runningCount is the number of messages started and not finished.
func (s *Source) runningCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.running
}
