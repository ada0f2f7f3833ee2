package recorder

import (
	"sync"
	"time"
)

// warnInterval is the least time between two identical warnings (same
// event and subject).
const warnInterval = 10 * time.Minute

// warnEvery logs a WARN event msg about subject at most once per
// warnInterval.
func (r *Recorder) warnEvery(msg, subject string, args ...any) {
	now := r.cfg.Now()
	key := msg + "\x00" + subject
	r.warnMu.Lock()
	last, seen := r.warned[key]
	if seen && now.Sub(last) < warnInterval {
		r.warnMu.Unlock()
		return
	}
	if r.warned == nil || len(r.warned) >= 256 {
		r.warned = map[string]time.Time{} // bounded: forget old subjects
	}
	r.warned[key] = now
	r.warnMu.Unlock()
	r.log.Warn(msg, args...)
}

// writeLossInterval is the least time between two recorder_write_failed
// lines; rows lost in between are summed into the next.
const writeLossInterval = 30 * time.Second

// lossEpisode tracks a run of failed writes until the next successful one.
type lossEpisode struct {
	mu            sync.Mutex
	active        bool
	started       time.Time
	lastLog       time.Time
	rows, batches int64 // lost in the episode
	pendRows      int64 // lost since the last line
	pendBatches   int64
}

// recordLoss counts a failed batch's rows as dropped and lost and logs the
// first failure of an episode, then at most every writeLossInterval.
func (r *Recorder) recordLoss(items []item, err error) {
	var events, tasks uint64
	for _, it := range items {
		if it.ev != nil {
			events++
		} else {
			tasks++
			events += uint64(it.folded)
		}
	}
	r.stats.writeErrors.Add(1)
	r.stats.eventsDropped.Add(events)
	r.stats.tasksDropped.Add(tasks)
	r.stats.rowsLost.Add(events + tasks)
	r.counts.lose(int64(tasks))

	now := r.cfg.Now()
	e := &r.loss
	e.mu.Lock()
	n := int64(events + tasks)
	e.rows, e.batches = e.rows+n, e.batches+1
	e.pendRows, e.pendBatches = e.pendRows+n, e.pendBatches+1
	first := !e.active
	if first {
		e.active, e.started = true, now
	}
	due := first || now.Sub(e.lastLog) >= writeLossInterval
	var rows, batches, total int64
	if due {
		rows, batches, total = e.pendRows, e.pendBatches, e.rows
		e.pendRows, e.pendBatches, e.lastLog = 0, 0, now
	}
	e.mu.Unlock()
	if due {
		r.log.Error("recorder_write_failed", "lost_rows", rows, "failed_batches", batches,
			"episode_lost_rows", total, "error", err.Error(),
			"detail", "the rows are dropped and counted; while writes keep failing this line repeats at most every 30s")
	}
}

// writeSucceeded ends a loss episode, logging what it cost.
func (r *Recorder) writeSucceeded() {
	e := &r.loss
	e.mu.Lock()
	if !e.active {
		e.mu.Unlock()
		return
	}
	rows, batches, started := e.rows, e.batches, e.started
	e.active, e.rows, e.batches, e.pendRows, e.pendBatches = false, 0, 0, 0, 0
	e.mu.Unlock()
	r.log.Warn("recorder_write_recovered", "lost_rows", rows, "failed_batches", batches,
		"duration_ms", r.cfg.Now().Sub(started).Milliseconds())
}
