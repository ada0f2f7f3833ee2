package kafka

import (
	"slices"
	"time"

	"svc/worker/config"
)

// Intake model: see the package doc and docs/operations.md "Intake queues
// and fair dispatch". Per-key lanes keep per-key order at the sinks; free
// slots go to the partitions in turn.

// Byte caps of waiting work and of the results being delivered.
const (
	partWaitBytes  = 32 << 20
	totalWaitBytes = 64 << 20
	deliverBytes   = 64 << 20
)

// limits are the intake bounds derived from the config.
type limits struct {
	maxRunning    int // pipeline.max_in_flight: messages running their tasks
	maxDelivering int // messages whose results are being delivered: 4 × maxRunning
	maxStaged     int // exactly-once: finished messages waiting for their transaction, 16 × maxRunning
	partWait      int // waiting messages of one partition before its fetching pauses
	totalWait     int // waiting messages overall before all fetching pauses
}

// newLimits sizes the waiting caps from W = max(max_in_flight,
// max_poll_records): a partition's fetching pauses at 2W waiting, all
// fetching at 6W. A poll takes at most W, so one partition holds less than
// 3W, below where all fetching resumes: one busy key never holds intake of
// the others. At W and 4W partitions paused (and dropped their fetched
// data) dozens of times a backlog; 2W and 6W ran the Kafka bench 10-30 %
// faster.
func newLimits(cfg *config.Config) limits {
	w := max(cfg.Pipeline.MaxInFlight, cfg.Sources.Kafka.MaxPollRecords, 1)
	run := max(cfg.Pipeline.MaxInFlight, 1)
	return limits{maxRunning: run, maxDelivering: 4 * run, maxStaged: 16 * run, partWait: 2 * w, totalWait: 6 * w}
}

// queues are a partition's waiting work: per-key lanes (a lane's head is
// running or ready; the rest wait for it) and the ready FIFO.
type queues struct {
	lanes     map[string][]*msgWork
	ready     []*msgWork
	running   int
	waiting   int
	waitBytes int64
	saturated bool // too much waiting work: fetching paused until half of it started
	gone      bool // revoked or lost: nothing of it starts any more
}

func newQueues() queues { return queues{lanes: map[string][]*msgWork{}} }

// enqueueLocked adds a polled message to its partition's queues.
func (s *Source) enqueueLocked(w *msgWork) {
	p := w.part
	p.add(w.msg.Offset, w.epoch)
	p.waiting++
	p.waitBytes += w.size
	s.waiting++
	s.waitBytes += w.size
	if w.msg.Key != nil {
		k := string(w.msg.Key)
		q := p.lanes[k]
		p.lanes[k] = append(q, w)
		if len(q) > 0 { // an earlier message of this key goes first
			return
		}
	}
	s.readyLocked(w)
}

func (s *Source) readyLocked(w *msgWork) {
	p := w.part
	p.ready = append(p.ready, w)
	if len(p.ready) == 1 {
		s.ring = append(s.ring, p)
	}
}

// admitLocked starts waiting messages while slots are free, one partition
// at a time in turn; it returns the messages to start. Deliveries over
// their caps hold every start; staged messages at their cap every start
// but a commit point's (startCommitPointsLocked).
func (s *Source) admitLocked() []*msgWork {
	var start []*msgWork
	var now time.Time
	if len(s.ring) > 0 {
		now = time.Now()
	}
	for s.executing < s.lim.maxRunning && s.running-s.executing < s.lim.maxDelivering &&
		s.deliverBytes < deliverBytes && len(s.ring) > 0 {
		if s.staged >= s.lim.maxStaged || s.stagedBytes >= deliverBytes {
			return s.startCommitPointsLocked(start, now)
		}
		p := s.ring[0]
		s.ring[0] = nil
		s.ring = s.ring[1:]
		w := p.ready[0]
		p.ready[0] = nil
		p.ready = p.ready[1:]
		if len(p.ready) > 0 {
			s.ring = append(s.ring, p)
		}
		start = append(start, s.startLocked(w, now))
	}
	return start
}

// startCommitPointsLocked starts, while staged messages are at their cap,
// each ready message that is its partition's oldest unfinished one: no
// transaction commits past it, so holding it would hold the cap for ever.
func (s *Source) startCommitPointsLocked(start []*msgWork, now time.Time) []*msgWork {
	for _, p := range slices.Clone(s.ring) {
		if s.executing >= s.lim.maxRunning || p.head >= len(p.pending) {
			continue
		}
		oldest := p.pending[p.head].offset
		i := slices.IndexFunc(p.ready, func(w *msgWork) bool { return w.msg.Offset == oldest })
		if i < 0 {
			continue
		}
		w := p.ready[i]
		if p.ready = slices.Delete(p.ready, i, i+1); len(p.ready) == 0 {
			s.ring = slices.DeleteFunc(s.ring, func(q *partState) bool { return q == p })
		}
		start = append(start, s.startLocked(w, now))
	}
	return start
}

// startLocked moves w from waiting to running.
func (s *Source) startLocked(w *msgWork, now time.Time) *msgWork {
	s.unwaitLocked(w)
	w.started, w.startedAt = true, now
	w.part.running++
	s.running++
	s.executing++
	return w
}

func (s *Source) unwaitLocked(w *msgWork) {
	p := w.part
	p.waiting--
	p.waitBytes -= w.size
	s.waiting--
	s.waitBytes -= w.size
}

// executedLocked moves a message whose tasks ended to the deliveries.
func (s *Source) executedLocked(w *msgWork, resultBytes int64) {
	s.executing--
	w.resultBytes = resultBytes
	s.deliverBytes += resultBytes
}

// doneLocked accounts for a finished message (stalled: its partition
// stalls instead; quiet: see stallLocked) and readies the next of its key.
func (s *Source) doneLocked(w *msgWork, stalled, quiet bool) {
	p := w.part
	p.running--
	s.running--
	s.deliverBytes -= w.resultBytes
	if stalled {
		s.stallLocked(w, quiet)
	} else {
		p.finish(w.msg.Offset)
	}
	if w.msg.Key == nil {
		return
	}
	k := string(w.msg.Key)
	q := p.lanes[k]
	if len(q) == 0 || q[0] != w {
		return // the lane was cleared when the partition stalled or left
	}
	q[0] = nil
	q = q[1:]
	if len(q) == 0 {
		delete(p.lanes, k)
		return
	}
	p.lanes[k] = q
	s.readyLocked(q[0])
}

// dropWaitingLocked forgets every message of p that has not started: they
// stay uncommitted and are read again.
func (s *Source) dropWaitingLocked(p *partState) {
	if p.waiting == 0 {
		return
	}
	drop := func(w *msgWork) {
		if w.started || w.dropped {
			return
		}
		w.dropped = true
		s.unwaitLocked(w)
		p.release()
	}
	for _, w := range p.ready {
		drop(w)
	}
	p.ready = nil
	s.ring = slices.DeleteFunc(s.ring, func(x *partState) bool { return x == p })
	for k, q := range p.lanes {
		for _, w := range q {
			drop(w)
		}
		if q[0].started {
			p.lanes[k] = q[:1]
		} else {
			delete(p.lanes, k)
		}
	}
}

// dropAllWaitingLocked drops the waiting messages of every partition
// (shutdown: only running work is drained).
func (s *Source) dropAllWaitingLocked() {
	for _, p := range s.parts {
		s.dropWaitingLocked(p)
		s.updatePartLocked(p)
	}
	s.updateFlowLocked()
}

// settleLocked admits waiting messages and re-evaluates intake for the
// partitions whose queues changed; it returns the messages to start.
func (s *Source) settleLocked(touched ...*partState) []*msgWork {
	start := s.admitLocked()
	for _, p := range touched {
		s.updatePartLocked(p)
	}
	for _, w := range start {
		s.updatePartLocked(w.part)
	}
	s.updateFlowLocked()
	return start
}

// updatePartLocked pauses a partition's fetching once too much of its work
// waits, until less than half of that does. Stalled and departed
// partitions are left alone.
func (s *Source) updatePartLocked(p *partState) {
	if p.gone || p.stalled {
		return
	}
	over := p.waiting >= s.lim.partWait || p.waitBytes >= partWaitBytes
	under := p.waiting < max(1, s.lim.partWait/2) && p.waitBytes < partWaitBytes/2
	if over && !p.saturated || under && p.saturated {
		p.saturated = over
		s.flow.setSaturated(p.id, over)
	}
}

// updateFlowLocked pauses all fetching once too much work waits overall
// (backpressure), until less than half of it does; it sets the gauges.
func (s *Source) updateFlowLocked() {
	switch {
	case s.waiting >= s.lim.totalWait || s.waitBytes >= totalWaitBytes:
		s.held = true
	case s.waiting < max(1, s.lim.totalWait/2) && s.waitBytes < totalWaitBytes/2:
		s.held = false
	}
	if s.held != s.heldSet { // flow's lock only when it changes (twice a message otherwise)
		s.heldSet = s.held
		s.flow.setBackpressure(s.held)
	}
	s.m.inflight.Set(float64(s.running))
	s.m.delivering.Set(float64(s.running - s.executing))
	s.m.staged.Set(float64(s.staged))
	s.m.waiting.Set(float64(s.waiting))
}

// pollRoomLocked is how many records the next poll may take: 0 while
// backpressure holds.
func (s *Source) pollRoomLocked() int {
	if s.held {
		return 0
	}
	return max(0, min(s.cfg.MaxPollRecords, s.lim.totalWait-s.waiting))
}
