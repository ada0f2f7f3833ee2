package kafka

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"svc/worker/model"
)

// atLeastOnce is the at-least-once committer: a message's results are
// delivered, then it is finished; commit points are committed every
// commit_interval, on revoke and at shutdown.
type atLeastOnce struct{ *Source }

func (s atLeastOnce) newClient(opts []kgo.Opt) (*kgo.Client, error) {
	return kgo.NewClient(append(opts, kgo.DisableAutoCommit())...)
}

func (s atLeastOnce) background(ctx context.Context) { s.commitLoop(ctx) }
func (s atLeastOnce) turn(context.Context) bool      { return s.fenced.Load() == nil }
func (atLeastOnce) again(context.Context) bool       { return false }
func (atLeastOnce) pollWait() time.Duration          { return time.Second }
func (atLeastOnce) transactional() bool              { return false }
func (s atLeastOnce) last(ctx context.Context)       { s.commit(ctx, nil) }
func (s atLeastOnce) onLost(ps []int32)              { s.forget(ps) }

// onRevoked drops the revoked partitions' waiting messages, lets their
// running ones finish (up to revoke_timeout), commits what finished (during
// a consume pause too: the next owner would redo it) and forgets them.
func (s atLeastOnce) onRevoked(ctx context.Context, ps []int32) {
	s.mu.Lock()
	for _, p := range ps {
		if st := s.parts[p]; st != nil {
			s.dropWaitingLocked(st)
		}
	}
	s.updateFlowLocked()
	s.mu.Unlock()
	deadline := time.After(s.cfg.RevokeTimeout.D())
	for _, p := range ps {
		if !s.live.Load() { // shutdown: Run has drained already
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
	s.forget(ps)
}

// memberFenced stops consuming for good after the group refused this
// worker's static membership: another worker of the same worker.name owns
// the partitions now.
func (s atLeastOnce) memberFenced(err error) {
	if !s.fenced.CompareAndSwap(nil, &err) {
		return
	}
	name := s.wcfg.Worker.Name
	s.log.Error("kafka_member_fenced", "instance_id", name, "error", err.Error(),
		"detail", "another worker with this worker.name joined the group as the same static member and owns the partitions: this one stops consuming and reports not ready; give each worker its own name")
	s.app.Events().State("kafka_member_fenced", map[string]any{"instance_id": name, "error": err.Error()})
	s.app.SetReady("kafka", fmt.Sprintf("fenced: another worker joined the consumer group as %s (same worker.name); consuming stopped: %v", name, err))
}

// finished delivers j's results and then finishes its message: one result
// asynchronously, several in order on a goroutine of their own. A result
// not run (notRun) leaves the message uncommitted, with no DLQ. The
// messages its end admits start from finish: it returns none.
func (s atLeastOnce) finished(j job, taskCtx context.Context, results []model.TaskResult) []job {
	var first [1]*model.TaskResult // on the stack: the usual one result allocates nothing here
	todo := first[:0]
	unfinished := false
	for i := range results {
		if notRun(taskCtx, &results[i]) {
			unfinished = true
			continue
		}
		todo = append(todo, &results[i])
	}
	switch len(todo) {
	case 0:
		s.finish(j, false, unfinished)
	case 1: // err: a DLQ send failed under "stall", or the task context ended past the drain deadline
		s.app.DeliverAsync(todo[0], func(err error) { s.finish(j, err != nil, unfinished) })
	default:
		several := slices.Clone(todo)
		go func() {
			stalled := false
			for _, r := range several {
				if s.app.Deliver(r) != nil {
					stalled = true
				}
			}
			s.finish(j, stalled, unfinished)
		}()
	}
	return nil
}

// finish accounts for j's delivered message (stalled: its partition
// stalls; unfinished: it stays uncommitted, quietly), starts what that
// lets in and lets j's hold go.
func (s atLeastOnce) finish(j job, stalled, unfinished bool) {
	s.mu.Lock()
	s.doneLocked(j.w, stalled || unfinished, !stalled)
	next := s.jobs(s.settleLocked(j.w.part))
	wake := s.pollWakeLocked()
	s.mu.Unlock()
	if wake {
		s.signalRoom()
	}
	s.start(next)
	j.done()
}

// commitLoop commits every commit_interval, and at once when a consume
// pause ends; nothing while one is active.
func (s atLeastOnce) commitLoop(ctx context.Context) {
	t := time.NewTicker(s.cfg.CommitInterval.D())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-s.commitNow:
		}
		if s.flow.commitsHeld() {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		s.commit(cctx, nil)
		cancel()
	}
}

// commitSoon asks for a commit now (end of a consume pause); never blocks.
func (s *Source) commitSoon() {
	select {
	case s.commitNow <- struct{}{}:
	default:
	}
}

// commit sends the commit point of the given partitions (nil: all owned)
// when it moved since the last commit.
func (s atLeastOnce) commit(ctx context.Context, only []int32) {
	s.commitMu.Lock()
	defer s.commitMu.Unlock()
	offsets := map[int32]kgo.EpochOffset{}
	s.mu.Lock()
	for p, st := range s.parts {
		if only != nil && !slices.Contains(only, p) {
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
	s.committed(offsets)
}

// committed counts and reports a successful commit, in either mode.
func (s *Source) committed(offsets map[int32]kgo.EpochOffset) {
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
