package kafka

import (
	"context"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// assigned creates state for new partitions. Intake pauses are topic-wide,
// so partitions assigned during a pause arrive paused.
func (s *Source) assigned(_ context.Context, _ *kgo.Client, m map[string][]int32) {
	s.mu.Lock()
	for _, p := range m[s.topic] {
		if s.parts[p] == nil {
			s.parts[p] = newPartState()
		}
	}
	n := len(s.parts)
	s.mu.Unlock()
	if len(m[s.topic]) > 0 {
		s.m.rebalance.WithLabelValues("assigned").Inc()
		s.log.Info("partitions_assigned", "partitions", m[s.topic], "owned", n)
	}
	s.app.SetReady("kafka", "")
}

// revoked drains the revoked partitions' in-flight messages (up to
// sources.kafka.revoke_timeout), commits what finished and forgets them,
// clearing any stall so a later owner starts clean.
func (s *Source) revoked(ctx context.Context, cl *kgo.Client, m map[string][]int32) {
	ps := m[s.topic]
	if len(ps) == 0 {
		return
	}
	s.m.rebalance.WithLabelValues("revoked").Inc()
	deadline := time.After(s.cfg.RevokeTimeout.D())
	// On shutdown run has already waited worker.shutdown_timeout for the
	// work in flight; waiting revoke_timeout on top would overrun it.
	for _, p := range ps {
		if !s.live.Load() {
			break
		}
		s.mu.Lock()
		st := s.parts[p]
		var wait <-chan struct{}
		if st != nil {
			wait = st.waitDrained()
		}
		s.mu.Unlock()
		if wait == nil {
			continue
		}
		select {
		case <-wait:
		case <-deadline:
			s.log.Warn("revoke_drain_deadline_reached", "partition", p, "revoke_timeout", s.cfg.RevokeTimeout.D().String())
		case <-ctx.Done():
		}
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	s.commit(cctx, ps)
	cancel()
	s.forget(cl, ps)
	s.log.Info("partitions_revoked", "partitions", ps)
}

// lost forgets partitions without committing: the group moved on and a
// commit would be rejected.
func (s *Source) lost(_ context.Context, cl *kgo.Client, m map[string][]int32) {
	ps := m[s.topic]
	if len(ps) == 0 {
		return
	}
	s.m.rebalance.WithLabelValues("lost").Inc()
	s.forget(cl, ps)
	s.log.Warn("partitions_lost", "partitions", ps)
}

func (s *Source) forget(cl *kgo.Client, ps []int32) {
	var unstall []int32
	s.mu.Lock()
	for _, p := range ps {
		if st := s.parts[p]; st != nil && st.stalled {
			unstall = append(unstall, p)
			s.m.stalled.Dec()
		}
		delete(s.parts, p)
	}
	s.mu.Unlock()
	if len(unstall) > 0 {
		cl.ResumeFetchPartitions(map[string][]int32{s.topic: unstall})
	}
}

// commitLoop commits finished offsets every sources.kafka.commit_interval.
func (s *Source) commitLoop(ctx context.Context) {
	t := time.NewTicker(s.cfg.CommitInterval.D())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			s.commit(cctx, nil)
			cancel()
		}
	}
}

// commit sends the commit point of the given partitions (nil: all owned)
// when it moved since the last commit.
func (s *Source) commit(ctx context.Context, only []int32) {
	s.commitMu.Lock()
	defer s.commitMu.Unlock()
	offsets := map[int32]kgo.EpochOffset{}
	s.mu.Lock()
	for p, st := range s.parts {
		if only != nil && !contains(only, p) {
			continue
		}
		if eo, ok := st.committable(); ok {
			offsets[p] = eo
		}
	}
	s.mu.Unlock()
	if len(offsets) == 0 {
		return
	}
	var failed error
	s.cl.CommitOffsetsSync(ctx, map[string]map[int32]kgo.EpochOffset{s.topic: offsets},
		func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			if err != nil {
				failed = err
				return
			}
			for _, t := range resp.Topics {
				for _, p := range t.Partitions {
					if perr := kerr.ErrorForCode(p.ErrorCode); perr != nil {
						failed = perr
						delete(offsets, p.Partition)
					}
				}
			}
		})
	s.mu.Lock()
	for p, eo := range offsets {
		if st := s.parts[p]; st != nil && failed == nil {
			st.sent = eo.Offset
		}
	}
	s.mu.Unlock()
	if failed != nil {
		s.m.commits.WithLabelValues("error").Inc()
		s.log.Warn("offset_commit_failed", "error", failed.Error())
		return
	}
	s.m.commits.WithLabelValues("ok").Inc()
	committed := make(map[int32]int64, len(offsets))
	for p, eo := range offsets {
		committed[p] = eo.Offset
	}
	s.app.Events().Committed(committed)
	if s.onCommit != nil {
		s.onCommit(committed)
	}
}

func contains(ps []int32, p int32) bool {
	for _, x := range ps {
		if x == p {
			return true
		}
	}
	return false
}

// drainAll waits until no message is in flight or timeout passes.
func (s *Source) drainAll(timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for s.inflightCount() > 0 && time.Now().Before(deadline) {
		select {
		case <-s.room:
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// pauseTarget implementation: intake pauses are topic-wide (kgo keeps topic
// and partition pauses apart, so stall-paused partitions stay paused when
// the topic resumes).

func (s *Source) pauseIntake()  { s.cl.PauseFetchTopics(s.topic) }
func (s *Source) resumeIntake() { s.cl.ResumeFetchTopics(s.topic) }
func (s *Source) running() bool { return s.live.Load() }

func (s *Source) assignedPartitions() []int32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]int32, 0, len(s.parts))
	for p := range s.parts {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}
