package kafka

import (
	"slices"
	"sort"
)

// The whole group's partitions: one worker answers for every partition of
// the source topic, owned by it, by another live worker, by a dead member
// or by nobody, so an operator sees the group's lag from any worker.

// GroupPartition is one partition of the source topic, whoever owns it.
// Offsets are as last read from the brokers (this worker's own commits
// count at once); Paused and Stalled come from this worker's state for its
// own partitions, from the owner's fleet card (as of its last heartbeat)
// for another worker's, and are null when nothing says (an owner without a
// card, an unowned partition).
type GroupPartition struct {
	Partition       int32  `json:"partition"`
	CommittedOffset *int64 `json:"committed_offset"`
	HighWatermark   *int64 `json:"high_watermark"`
	Lag             *int64 `json:"lag"`
	// Owner is the member the group assigned it to, live or dead; null
	// when no member has it (a rebalance is under way).
	Owner *Member `json:"owner"`
	// Mine: this worker consumes it.
	Mine bool `json:"mine"`
	// Unowned: no live member consumes it (held by a dead member until its
	// session times out, or by nobody); UnownedSinceMS is when this worker
	// first saw it so (0 while owned).
	Unowned        bool  `json:"unowned"`
	UnownedSinceMS int64 `json:"unowned_since_ms"`
	Paused         *bool `json:"paused"`
	Stalled        *bool `json:"stalled"`
	// OldestUnconsumedMS is the timestamp of the record at the committed
	// offset (the oldest message not yet consumed) and LagSeconds how old
	// it is now: 0 without lag, null until read (lagtime.go).
	OldestUnconsumedMS *int64   `json:"oldest_unconsumed_ms"`
	LagSeconds         *float64 `json:"lag_seconds"`
	// Drain is the time-to-drain estimate; LagTrend the lag as sampled by
	// the lag loop over the last minutes (oldest first).
	Drain    *Drain     `json:"drain"`
	LagTrend []LagPoint `json:"lag_trend"`
	// HeadOfLine is what holds the partition back, for this worker's own
	// partitions (null for the others: headofline.go).
	HeadOfLine *HeadOfLine `json:"head_of_line"`
}

// PartitionFlow is what a worker's fleet card says of its partitions'
// fetching: those paused (for any reason) and those stall-paused.
type PartitionFlow struct {
	Paused, Stalled []int32
}

// PeerFlow returns, by worker name, what each live worker's card says of
// its partitions' fetching.
type PeerFlow func() map[string]PartitionFlow

// SetPeerFlow gives the source the fleet cards' view of other workers'
// paused and stalled partitions, for the whole group's view. Call before
// Run.
func (s *Source) SetPeerFlow(f PeerFlow) { s.peerFlow = f }

// groupPartitions lists every partition of the topic as last read, by
// partition, and the lag of all of them together (nil until a lag is
// known).
func (s *Source) groupPartitions(mine []PartitionState, orphaned []OrphanedPartition) ([]GroupPartition, *int64) {
	_, hwm, start, committed := s.offsets.snapshot()
	s.offsets.mu.Lock()
	g := s.offsets.members
	s.offsets.mu.Unlock()
	self, _ := s.owner()
	var flows map[string]PartitionFlow
	if s.peerFlow != nil {
		flows = s.peerFlow()
	}
	own := make(map[int32]PartitionState, len(mine))
	for _, r := range mine {
		own[r.Partition] = r
	}
	unowned := make(map[int32]OrphanedPartition, len(orphaned))
	for _, o := range orphaned {
		unowned[o.Partition] = o
	}
	selfMember := Member{MemberID: self.MemberID, InstanceID: self.InstanceID, ClientID: "svc-" + self.Worker, Worker: self.Worker}
	for _, m := range g.members {
		if m.MemberID == self.MemberID {
			selfMember = m
		}
	}
	flag := func(b bool) *bool { return &b }
	var total int64
	known := false
	out := make([]GroupPartition, 0, len(hwm))
	for p, h := range hwm {
		row := GroupPartition{Partition: p}
		switch r, ok := own[p]; {
		case ok:
			m := selfMember
			row.Owner, row.Mine = &m, true
			row.CommittedOffset, row.HighWatermark, row.Lag = r.CommittedOffset, r.HighWatermark, r.Lag
			row.Paused, row.Stalled = flag(r.Paused), flag(r.Stalled)
		default:
			row.HighWatermark, row.CommittedOffset, row.Lag = offsetsOf(p, h, committed, start)
			if o, isUnowned := unowned[p]; isUnowned {
				row.Owner, row.Unowned, row.UnownedSinceMS = o.Holder, true, o.SinceMS
			} else if m, held := g.holder[p]; held {
				row.Owner = &m
				if f, card := flows[m.Worker]; card && m.Worker != "" {
					row.Paused, row.Stalled = flag(slices.Contains(f.Paused, p)), flag(slices.Contains(f.Stalled, p))
				}
			}
		}
		if row.Lag != nil {
			total += *row.Lag
			known = true
		}
		out = append(out, row)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Partition < out[j].Partition })
	if !known {
		return out, nil
	}
	return out, &total
}
