package kafka

import (
	"slices"
	"sort"
)

// GroupPartition is one partition of the source topic, whoever owns it:
// one worker answers for the whole group (docs/api.md, group_partitions).
// Paused and Stalled come from the owner's fleet card for another worker's
// partition, nil when nothing says; HeadOfLine is set for this worker's.
type GroupPartition struct {
	Partition          int32       `json:"partition"`
	CommittedOffset    *int64      `json:"committed_offset"`
	HighWatermark      *int64      `json:"high_watermark"`
	Lag                *int64      `json:"lag"`
	Owner              *Member     `json:"owner"` // live or dead; nil while no member has it
	Mine               bool        `json:"mine"`
	Unowned            bool        `json:"unowned"`
	UnownedSinceMS     int64       `json:"unowned_since_ms"`
	Paused             *bool       `json:"paused"`
	Stalled            *bool       `json:"stalled"`
	OldestUnconsumedMS *int64      `json:"oldest_unconsumed_ms"`
	LagSeconds         *float64    `json:"lag_seconds"`
	Drain              *Drain      `json:"drain"`
	LagTrend           []LagPoint  `json:"lag_trend"`
	HeadOfLine         *HeadOfLine `json:"head_of_line"`
}

// PartitionFlow is a worker's fleet card's paused (for any reason) and
// stall-paused partitions.
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

// groupPartitions lists every partition of the topic as last read, and
// their total lag (nil until one is known).
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
	boolp := func(b bool) *bool { return &b }
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
			row.Paused, row.Stalled = boolp(r.Paused), boolp(r.Stalled)
		default:
			row.HighWatermark, row.CommittedOffset, row.Lag = offsetsOf(p, h, committed, start)
			if o, isUnowned := unowned[p]; isUnowned {
				row.Owner, row.Unowned, row.UnownedSinceMS = o.Holder, true, o.SinceMS
			} else if m, held := g.holder[p]; held {
				row.Owner = &m
				if f, card := flows[m.Worker]; card && m.Worker != "" {
					row.Paused, row.Stalled = boolp(slices.Contains(f.Paused, p)), boolp(slices.Contains(f.Stalled, p))
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
