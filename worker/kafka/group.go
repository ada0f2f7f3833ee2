package kafka

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"svc/worker/sink"
)

// assigned creates state for new partitions. Consume pause and backpressure
// pause the whole topic, so partitions assigned during one arrive paused.
func (s *Source) assigned(_ context.Context, _ *kgo.Client, m map[string][]int32) {
	s.mu.Lock()
	for _, p := range m[s.topic] {
		if s.parts[p] == nil {
			s.parts[p] = newPartState(p)
		}
	}
	n := len(s.parts)
	s.mu.Unlock()
	if len(m[s.topic]) > 0 {
		s.m.rebalance.WithLabelValues("assigned").Inc()
		s.log.Info("partitions_assigned", "partitions", m[s.topic], "owned", n)
	}
	if s.fenced.Load() != nil {
		// Fenced: consuming stopped for good, whatever a rejoin begun
		// before the fence hands out; the reason stays.
		return
	}
	s.app.SetReady("kafka", "")
}

// revoked takes partitions away in a rebalance: at least once, what
// finished is committed first; exactly once, the open work is aborted.
func (s *Source) revoked(ctx context.Context, _ *kgo.Client, m map[string][]int32) {
	ps := m[s.topic]
	if len(ps) == 0 {
		return
	}
	s.m.rebalance.WithLabelValues("revoked").Inc()
	s.c.onRevoked(ctx, ps)
	s.log.Info("partitions_revoked", "partitions", ps)
}

// lost forgets partitions without committing: the group moved on and a
// commit would be rejected.
func (s *Source) lost(_ context.Context, _ *kgo.Client, m map[string][]int32) {
	ps := m[s.topic]
	if len(ps) == 0 {
		return
	}
	s.m.rebalance.WithLabelValues("lost").Inc()
	s.c.onLost(ps)
	s.log.Warn("partitions_lost", "partitions", ps)
}

// forget drops the partitions' state (their running messages finish
// against it) and lifts their own fetch pauses. It returns the staged
// results of their finished messages (exactly-once), never to commit.
func (s *Source) forget(ps []int32) []*sink.Staged {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.forgetLocked(ps)
}

func (s *Source) forgetLocked(ps []int32) []*sink.Staged {
	var dropped []*sink.Staged
	for _, p := range ps {
		st := s.parts[p]
		if st == nil {
			continue
		}
		s.dropWaitingLocked(st)
		st.gone = true
		for _, m := range st.outbox {
			s.staged--
			s.stagedBytes -= m.bytes
			dropped = append(dropped, m.results...)
		}
		st.outbox = nil
		if st.stallPaused {
			s.m.stalled.Dec()
		}
		delete(s.parts, p)
	}
	s.updateFlowLocked()
	s.flow.forget(ps)
	return dropped
}

// drainAll waits until no message runs or timeout passes.
func (s *Source) drainAll(timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for s.runningCount() > 0 && time.Now().Before(deadline) {
		select {
		case <-s.room:
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// pauseTarget implementation: kgo keeps topic and partition pauses apart.

func (s *Source) pauseIntake()  { s.cl.PauseFetchTopics(s.topic) }
func (s *Source) resumeIntake() { s.cl.ResumeFetchTopics(s.topic) }
func (s *Source) pausePartitions(ps []int32) {
	s.cl.PauseFetchPartitions(map[string][]int32{s.topic: ps})
}
func (s *Source) resumePartitions(ps []int32) {
	s.cl.ResumeFetchPartitions(map[string][]int32{s.topic: ps})
}
func (s *Source) consuming() bool { return s.live.Load() }

func (s *Source) assignedPartitions() []int32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	ps := slices.AppendSeq(make([]int32, 0, len(s.parts)), maps.Keys(s.parts)) // [] in logs when none
	slices.Sort(ps)
	return ps
}
