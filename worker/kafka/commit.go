package kafka

import (
	"context"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// commitLoop commits finished offsets every sources.kafka.commit_interval,
// except while the operator's consume pause holds intake (nothing is
// committed while paused); the end of the pause asks for a commit at once.
func (s *Source) commitLoop(ctx context.Context) {
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

// commitSoon asks the commit loop for a commit now (end of a consume
// pause); it never blocks.
func (s *Source) commitSoon() {
	select {
	case s.commitNow <- struct{}{}:
	default:
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
