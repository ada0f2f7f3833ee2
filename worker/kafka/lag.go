package kafka

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// lagInterval is how often the lag loop reads the assigned partitions'
// offsets from the brokers; brokerTimeout bounds each read.
const (
	lagInterval   = 10 * time.Second
	brokerTimeout = 10 * time.Second
)

// Protocol is the only group protocol the source's consumer speaks: a
// consumer with another protocol cannot join its group.
const Protocol = "cooperative-sticky"

// offsetCache holds the source topic's offsets as last read from the
// brokers. Its lock is a leaf.
type offsetCache struct {
	mu                    sync.Mutex
	at                    time.Time
	hwm, start, committed map[int32]int64
	members               groupMembers
	orphanSince           map[int32]time.Time
	clock                 lagClock    // lag in time and drain rates (lagtime.go)
	reader                *kgo.Client // reads the oldest unconsumed records for clock
}

func (c *offsetCache) snapshot() (at time.Time, hwm, start, committed map[int32]int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.at, c.hwm, c.start, c.committed
}

// Owner is the group member that owns a partition: this worker.
type Owner struct {
	Worker     string  `json:"worker"`
	MemberID   string  `json:"member_id"`
	InstanceID *string `json:"instance_id"` // static membership only
}

// PartitionState is one assigned partition of the group view. Offsets are
// nil until read; lag counts from the log start when nothing is committed.
type PartitionState struct {
	Partition       int32  `json:"partition"`
	CommittedOffset *int64 `json:"committed_offset"`
	HighWatermark   *int64 `json:"high_watermark"`
	Lag             *int64 `json:"lag"`
	InFlight        int    `json:"in_flight"`
	Waiting         int    `json:"waiting"`
	Paused          bool   `json:"paused"`
	Stalled         bool   `json:"stalled"`
	Owner           Owner  `json:"owner"`
}

// GroupState is the consumer group as this worker sees it (docs/api.md,
// GET /api/v1/debug/kafka/group). The topic shows as the alias "source".
type GroupState struct {
	Group           string              `json:"group"`
	Alias           string              `json:"alias"`
	Protocol        string              `json:"protocol"`
	Generation      int32               `json:"generation"`
	Owner           Owner               `json:"owner"`
	OffsetsReadAtMS int64               `json:"offsets_read_at_ms"`
	Partitions      []PartitionState    `json:"partitions"`
	Members         []Member            `json:"members"`
	Orphaned        []OrphanedPartition `json:"orphaned"`
	GroupPartitions []GroupPartition    `json:"group_partitions"`
	TotalLag        *int64              `json:"total_lag"`
	LagSeconds      *float64            `json:"lag_seconds"` // the oldest unconsumed message's age
	Drain           *Drain              `json:"drain"`       // its slowest partition's
}

// ErrGroupRead is a failed or timed-out read of the group's offsets from
// the brokers.
var ErrGroupRead = errors.New("reading the group's offsets from the brokers failed")

// groupReadError is an ErrGroupRead whose text names no topic and no
// broker address (API answers show neither); it unwraps to the cause too.
type groupReadError struct{ cause error }

func (e *groupReadError) Error() string {
	msg := "read the offsets of alias 'source' and the group: "
	var ke *kerr.Error
	var ne net.Error
	switch {
	case errors.Is(e.cause, context.DeadlineExceeded):
		return msg + "the brokers did not answer before the deadline"
	case errors.As(e.cause, &ke):
		return msg + "broker error " + ke.Message
	case errors.As(e.cause, &ne), errors.Is(e.cause, io.EOF):
		return msg + "connection to the brokers failed"
	}
	return msg + "the read failed"
}

func (e *groupReadError) Unwrap() []error { return []error{ErrGroupRead, e.cause} }

// GroupState reads the assigned partitions' offsets from the brokers
// (bounded by ctx) and returns the group view. Errors:
// ErrConsumerNotRunning, ErrGroupRead.
func (s *Source) GroupState(ctx context.Context) (GroupState, error) {
	if !s.live.Load() {
		return GroupState{}, ErrConsumerNotRunning
	}
	if err := s.readOffsets(ctx); errors.Is(err, ErrConsumerNotRunning) {
		return GroupState{}, err
	} else if err != nil {
		return GroupState{}, &groupReadError{cause: err}
	}
	at, _, _, _ := s.offsets.snapshot()
	owner, gen := s.owner()
	s.offsets.mu.Lock()
	members := append([]Member{}, s.offsets.members.members...)
	s.offsets.mu.Unlock()
	orphaned, _ := s.orphans()
	if orphaned == nil {
		orphaned = []OrphanedPartition{}
	}
	rows := s.partitionRows()
	all, total := s.groupPartitions(rows, orphaned)
	s.offsets.clock.fill(time.Now(), all)
	s.fillHeadOfLine(all)
	age, drain := groupDrain(all)
	return GroupState{
		Group: s.cfg.Group, Alias: "source", Protocol: Protocol, Generation: gen, Owner: owner,
		OffsetsReadAtMS: at.UnixMilli(), Partitions: rows, Members: members, Orphaned: orphaned,
		GroupPartitions: all, TotalLag: total, LagSeconds: age, Drain: drain,
	}, nil
}

func (s *Source) owner() (Owner, int32) {
	o := Owner{Worker: s.wcfg.Worker.Name}
	if s.cfg.StartupAlignEnabled {
		id := s.wcfg.Worker.Name
		o.InstanceID = &id
	}
	cl := s.client()
	var gen int32 = -1
	if cl != nil {
		o.MemberID, gen = cl.GroupMetadata()
	}
	return o, gen
}

// lagLoop reads the offsets every lagEvery until ctx ends; a failed read
// keeps the last values and is logged once until a read succeeds again.
func (s *Source) lagLoop(ctx context.Context) {
	t := time.NewTicker(s.lagEvery)
	defer t.Stop()
	defer s.closeAgeReader()
	failing := false
	for {
		rctx, cancel := context.WithTimeout(ctx, brokerTimeout)
		err := s.readOffsets(rctx)
		cancel()
		if err == nil {
			s.ageRound(ctx)
		}
		switch {
		case ctx.Err() != nil:
			return
		case err != nil && !failing:
			s.log.Warn("kafka_offsets_read_failed", "error", err.Error(),
				"detail", "the lag gauges keep their last values until a read succeeds")
		case err == nil && failing:
			s.log.Info("kafka_offsets_read_recovered")
		}
		failing = err != nil
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// readOffsets reads the source topic's log start and end offsets and the
// group's committed offsets with the consumer's own client.
func (s *Source) readOffsets(ctx context.Context) error {
	cl := s.client()
	if cl == nil {
		return ErrConsumerNotRunning
	}
	adm := kadm.NewClient(cl)
	ends, err := adm.ListEndOffsets(ctx, s.topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return fmt.Errorf("list end offsets: %w", err)
	}
	starts, err := adm.ListStartOffsets(ctx, s.topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return fmt.Errorf("list start offsets: %w", err)
	}
	committed := map[int32]int64{}
	fetched, err := adm.FetchOffsets(ctx, s.cfg.Group)
	switch {
	case errors.Is(err, kerr.GroupIDNotFound): // nothing committed yet
	case err != nil:
		return fmt.Errorf("fetch committed offsets: %w", err)
	default:
		for p, o := range fetched[s.topic] {
			if o.Err == nil && o.At >= 0 {
				committed[p] = o.At
			}
		}
	}
	members, err := s.readMembers(ctx, adm)
	if err != nil {
		return err
	}
	hwm, start := map[int32]int64{}, map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) { hwm[o.Partition] = o.Offset })
	starts.Each(func(o kadm.ListedOffset) { start[o.Partition] = o.Offset })
	now := time.Now()
	s.offsets.mu.Lock()
	s.offsets.at, s.offsets.hwm, s.offsets.start, s.offsets.committed = now, hwm, start, committed
	if !members.stable && s.offsets.members.holder != nil {
		// A rebalance: the members keep what they had.
		members.holder = s.offsets.members.holder
		for i, m := range members.members {
			members.members[i].Partitions = nil
			for p, h := range members.holder {
				if h.MemberID == m.MemberID {
					members.members[i].Partitions = append(members.members[i].Partitions, p)
				}
			}
			slices.Sort(members.members[i].Partitions)
		}
	}
	s.offsets.members = members
	s.offsets.mu.Unlock()
	s.noteOrphans(now)
	return nil
}

// partitionRows is the state of every assigned partition, by partition,
// with the offsets as last read (this worker's later commits count).
func (s *Source) partitionRows() []PartitionState {
	topicPaused, holds := s.flow.fetchPaused()
	_, hwm, start, committed := s.offsets.snapshot()
	owner, _ := s.owner()
	s.mu.Lock()
	rows := make([]PartitionState, 0, len(s.parts))
	for _, p := range slices.Sorted(maps.Keys(s.parts)) {
		st := s.parts[p]
		r := PartitionState{Partition: p, InFlight: st.running, Waiting: st.waiting,
			Paused: topicPaused || holds[p].paused(), Stalled: st.stallPaused, Owner: owner}
		c, ok := committed[p]
		if st.sent > c || !ok && st.sent >= 0 {
			c, ok = st.sent, true
		}
		if ok {
			r.CommittedOffset = &c
		}
		if h, known := hwm[p]; known {
			r.HighWatermark = &h
			base, baseKnown := c, ok
			if !ok {
				base, baseKnown = start[p]
			}
			if baseKnown {
				lag := max(0, h-base)
				r.Lag = &lag
			}
		}
		rows = append(rows, r)
	}
	s.mu.Unlock()
	return rows
}
