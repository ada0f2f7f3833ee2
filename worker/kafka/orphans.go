package kafka

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// Orphaned partitions: no live member consumes them (a dead member holds
// them until its session times out, or nobody during a rebalance); see
// docs/operations.md "Consumer group". The live member with the smallest
// member id exports their lag.

// Held-by values of an orphaned partition.
const (
	HeldByNobody     = "nobody"      // assigned to no member (a rebalance is under way)
	HeldByDeadMember = "dead_member" // assigned to a member that is not alive
)

// Member is a group member as the brokers describe it. Worker is its
// static instance id, or its client id without "svc-" ("" for a client
// that is not an svc worker); Partitions as of the last stable group.
type Member struct {
	MemberID   string  `json:"member_id"`
	InstanceID *string `json:"instance_id"`
	ClientID   string  `json:"client_id"`
	Worker     string  `json:"worker"`
	Partitions []int32 `json:"partitions"`
}

// OrphanedPartition is a partition no live member consumes.
type OrphanedPartition struct {
	Partition       int32   `json:"partition"`
	CommittedOffset *int64  `json:"committed_offset"`
	HighWatermark   *int64  `json:"high_watermark"`
	Lag             *int64  `json:"lag"`
	HeldBy          string  `json:"held_by"`
	Holder          *Member `json:"holder"` // the dead member; null when held by nobody
	SinceMS         int64   `json:"since_ms"`
}

// Liveness returns the workers the fleet registry knows, by name, and
// whether each is alive (starting, running or draining).
type Liveness func() map[string]bool

// SetLiveness gives the source the fleet's view of which workers are
// alive. Without it, only this worker's own earlier instances (same name,
// another member id) count as dead. Call before Run.
func (s *Source) SetLiveness(f Liveness) { s.liveness = f }

// groupMembers is the group's membership as last read. holder is the
// assignment of the last stable read: during a (cooperative) rebalance
// members keep consuming what they had.
type groupMembers struct {
	members []Member
	holder  map[int32]Member // partition → its member
	stable  bool
}

// readMembers describes the group: who holds which partition of the topic.
func (s *Source) readMembers(ctx context.Context, adm *kadm.Client) (groupMembers, error) {
	g := groupMembers{holder: map[int32]Member{}}
	described, err := adm.DescribeGroups(ctx, s.cfg.Group)
	if err != nil {
		return g, fmt.Errorf("describe group: %w", err)
	}
	d, ok := described[s.cfg.Group]
	if !ok || errors.Is(d.Err, kerr.GroupIDNotFound) {
		return g, nil
	}
	if d.Err != nil {
		return g, fmt.Errorf("describe group: %w", d.Err)
	}
	g.stable = d.State == "Stable"
	for _, m := range d.Members {
		mem := Member{MemberID: m.MemberID, InstanceID: m.InstanceID, ClientID: m.ClientID, Worker: strings.TrimPrefix(m.ClientID, "svc-")}
		if m.InstanceID != nil {
			mem.Worker = *m.InstanceID
		} else if !strings.HasPrefix(m.ClientID, "svc-") {
			mem.Worker = ""
		}
		if c, ok := m.Assigned.AsConsumer(); ok {
			for _, t := range c.Topics {
				if t.Topic == s.topic {
					mem.Partitions = append(mem.Partitions, t.Partitions...)
				}
			}
		}
		slices.Sort(mem.Partitions)
		g.members = append(g.members, mem)
		for _, p := range mem.Partitions {
			g.holder[p] = mem
		}
	}
	return g, nil
}

// alive tells whether a member is alive: this worker's own member is,
// another of its name is a dead earlier instance; otherwise the fleet
// registry decides, and a member it does not know counts as alive.
func (s *Source) alive(m Member, self string, fleet map[string]bool) bool {
	if m.MemberID == self {
		return true
	}
	if m.Worker != "" && m.Worker == s.wcfg.Worker.Name {
		return false
	}
	if alive, known := fleet[m.Worker]; known && m.Worker != "" {
		return alive
	}
	return true
}

// orphans returns the partitions no live member consumes, and whether this
// worker is the group's reporter (the live member with the smallest id).
func (s *Source) orphans() ([]OrphanedPartition, bool) {
	_, hwm, start, committed := s.offsets.snapshot()
	s.offsets.mu.Lock()
	g, since := s.offsets.members, s.offsets.orphanSince
	s.offsets.mu.Unlock()
	self, _ := s.owner()
	var fleet map[string]bool
	if s.liveness != nil {
		fleet = s.liveness()
	}
	smallest := ""
	for _, m := range g.members {
		if s.alive(m, self.MemberID, fleet) && (smallest == "" || m.MemberID < smallest) {
			smallest = m.MemberID
		}
	}
	reporter := self.MemberID != "" && smallest == self.MemberID
	mine := s.assignedPartitions()
	var out []OrphanedPartition
	for p, h := range hwm {
		if slices.Contains(mine, p) {
			continue
		}
		o := OrphanedPartition{Partition: p, HeldBy: HeldByNobody}
		if m, held := g.holder[p]; held {
			if s.alive(m, self.MemberID, fleet) {
				continue
			}
			o.HeldBy, o.Holder = HeldByDeadMember, &m
		}
		o.HighWatermark, o.CommittedOffset, o.Lag = offsetsOf(p, h, committed, start)
		if t, ok := since[p]; ok {
			o.SinceMS = t.UnixMilli()
		}
		out = append(out, o)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Partition < out[j].Partition })
	return out, reporter
}

// noteOrphans keeps when each partition became orphaned, across reads.
func (s *Source) noteOrphans(now time.Time) {
	list, _ := s.orphans()
	s.offsets.mu.Lock()
	defer s.offsets.mu.Unlock()
	since := make(map[int32]time.Time, len(list))
	for _, o := range list {
		if t, ok := s.offsets.orphanSince[o.Partition]; ok {
			since[o.Partition] = t
		} else {
			since[o.Partition] = now
		}
	}
	s.offsets.orphanSince = since
}

// offsetsOf is partition p's high watermark h, its committed offset and
// its lag: from the committed offset, else from the log start (nil when
// neither is known).
func offsetsOf(p int32, h int64, committed, start map[int32]int64) (hw, committedOffset, lag *int64) {
	hw = &h
	base, ok := committed[p]
	if ok {
		c := base
		committedOffset = &c
	} else {
		base, ok = start[p]
	}
	if ok {
		l := max(0, h-base)
		lag = &l
	}
	return hw, committedOffset, lag
}
