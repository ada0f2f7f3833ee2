package kafka

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"svc/worker/kconn"
)

// Lag in time and time to drain (docs/operations.md "Consumer group").
// Every lag read adds a sample of each partition's offsets to a short ring
// and reads the timestamp of the record at each lagging partition's
// committed offset when that offset moved, at most every ageEvery: a stuck
// partition costs one read, a caught-up one none.

const (
	// ageEvery is the shortest time between two reads of one partition's
	// oldest unconsumed record.
	ageEvery = 10 * time.Second
	// ageReadTimeout bounds one round of reads (all partitions together).
	ageReadTimeout = 5 * time.Second
	// ageMaxReads bounds the partitions read in one round; the rest wait
	// for the next round.
	ageMaxReads = 64
	// drainWindow is how far back the net rate of a partition is measured;
	// drainSamples bounds its ring (10 s steps: 5 minutes).
	drainWindow  = 5 * time.Minute
	drainSamples = 31
	// ageFetchBytes is what one read asks for per partition: as little as
	// possible, so the broker returns just the batch holding the offset.
	ageFetchBytes = 1 << 10
)

// Drain states of a partition or of the group.
const (
	DrainIdle          = "idle"           // no lag and nothing arriving
	DrainCaughtUp      = "caught_up"      // no lag, messages arriving and consumed
	DrainCatchingUp    = "catching_up"    // lag falling: Seconds says when it is 0
	DrainHolding       = "holding"        // lag steady while consuming: as fast in as out
	DrainFallingBehind = "falling_behind" // lag growing
	DrainStuck         = "not_consuming"  // lag and nothing consumed in the window
	DrainUnknown       = "unknown"        // not enough samples yet
)

// Drain is a time-to-drain estimate from the lag and the net rate
// (consumed minus produced) of the last minutes. Seconds is set for
// catching_up only.
type Drain struct {
	State         string   `json:"state"`
	Seconds       *float64 `json:"seconds"`
	WindowSeconds float64  `json:"window_seconds"`
	ConsumedPerS  float64  `json:"consumed_per_second"`
	ProducedPerS  float64  `json:"produced_per_second"`
}

// LagPoint is one sample of a partition's lag.
type LagPoint struct {
	TS  int64 `json:"ts_ms"`
	Lag int64 `json:"lag"`
}

type lagSample struct {
	at             time.Time
	committed, hwm int64
}

// partClock is one partition's samples and the timestamp ageTS of the
// record at ageOffset as last read (0: nothing readable there).
type partClock struct {
	samples   []lagSample // oldest first, at most drainSamples
	ageOffset int64
	ageTS     int64
	ageReadAt time.Time
	ageKnown  bool
}

// lagClock holds every partition's clock; its lock is a leaf. every is
// ageEvery unless a test shortens it.
type lagClock struct {
	mu    sync.Mutex
	parts map[int32]*partClock
	every time.Duration
	reads atomic.Int64 // records read
}

func (c *lagClock) part(p int32) *partClock {
	pc := c.parts[p]
	if pc == nil {
		pc = &partClock{}
		c.parts[p] = pc
	}
	return pc
}

// next is the offset a partition's consumer reads next: the committed
// offset, or the log start while nothing is committed (hwm - lag either
// way); false while the offsets are not known.
func next(r GroupPartition) (int64, bool) {
	if r.HighWatermark == nil || r.Lag == nil {
		return 0, false
	}
	return *r.HighWatermark - *r.Lag, true
}

// ageTarget is a partition whose oldest unconsumed record is to be read.
type ageTarget struct {
	p           int32
	offset, hwm int64
}

// round drops the partitions no longer in rows, adds the offsets read at
// at to each partition's ring, and lists the lagging partitions whose
// committed offset moved since their record was read, not read within
// every, at most ageMaxReads.
func (c *lagClock) round(now, at time.Time, rows []GroupPartition) []ageTarget {
	c.mu.Lock()
	defer c.mu.Unlock()
	every := cmp.Or(c.every, ageEvery)
	old := c.parts
	c.parts = make(map[int32]*partClock, len(rows))
	var out []ageTarget
	for _, r := range rows {
		if pc := old[r.Partition]; pc != nil {
			c.parts[r.Partition] = pc
		}
		n, ok := next(r)
		if !ok {
			continue
		}
		pc := c.part(r.Partition)
		pc.samples = append(pc.samples, lagSample{at: at, committed: n, hwm: *r.HighWatermark})
		if len(pc.samples) > drainSamples {
			pc.samples = append(pc.samples[:0], pc.samples[len(pc.samples)-drainSamples:]...)
		}
		if *r.Lag == 0 || len(out) == ageMaxReads || pc.ageKnown && pc.ageOffset == n || now.Sub(pc.ageReadAt) < every {
			continue
		}
		out = append(out, ageTarget{p: r.Partition, offset: n, hwm: *r.HighWatermark})
	}
	return out
}

// note keeps what a round read: the timestamp of the record at offset, or
// (ts 0) that nothing readable is there before the high watermark; t nil:
// no answer (not tried again before every).
func (c *lagClock) note(now time.Time, p int32, t *ageTarget, ts int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	pc := c.part(p)
	pc.ageReadAt = now
	if t != nil {
		pc.ageOffset, pc.ageTS, pc.ageKnown = t.offset, ts, true
		c.reads.Add(1)
	}
}

// age is a partition's lag in time and the timestamp of the record at
// next, the offset read next: 0 without lag, nil while not read.
func (pc *partClock) age(now time.Time, next, lag int64) (*int64, *float64) {
	if lag == 0 {
		zero := 0.0
		return nil, &zero
	}
	if pc == nil || !pc.ageKnown || pc.ageOffset != next {
		return nil, nil
	}
	if pc.ageTS == 0 { // transaction markers only: nothing to consume
		zero := 0.0
		return nil, &zero
	}
	ts := pc.ageTS
	secs := max(0, float64(now.UnixMilli()-ts)/1000)
	return &ts, &secs
}

// ageSeconds is age for the metrics.
func (c *lagClock) ageSeconds(now time.Time, p int32, hwm, lag int64) *float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, secs := c.parts[p].age(now, hwm-lag, lag)
	return secs
}

// fill sets each row's lag in time, drain estimate and lag trend, as of now.
func (c *lagClock) fill(now time.Time, rows []GroupPartition) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range rows {
		r := &rows[i]
		r.LagTrend = []LagPoint{}
		pc := c.parts[r.Partition]
		n, ok := next(*r)
		if !ok {
			continue
		}
		r.OldestUnconsumedMS, r.LagSeconds = pc.age(now, n, *r.Lag)
		if pc == nil {
			d := Drain{State: DrainUnknown}
			r.Drain = &d
			continue
		}
		d := drainOf(pc.samples, now, *r.Lag)
		r.Drain = &d
		for _, s := range pc.samples {
			r.LagTrend = append(r.LagTrend, LagPoint{TS: s.at.UnixMilli(), Lag: max(0, s.hwm-s.committed)})
		}
	}
}

// drainOf estimates a partition's time to drain from its samples of the
// last drainWindow and its lag now.
func drainOf(samples []lagSample, now time.Time, lag int64) Drain {
	var first, last *lagSample
	for i := range samples {
		if now.Sub(samples[i].at) <= drainWindow+ageEvery/2 {
			if first == nil {
				first = &samples[i]
			}
			last = &samples[i]
		}
	}
	if first == nil || first == last || last.at.Sub(first.at) < time.Second {
		if lag == 0 {
			return Drain{State: DrainCaughtUp}
		}
		return Drain{State: DrainUnknown}
	}
	secs := last.at.Sub(first.at).Seconds()
	d := Drain{WindowSeconds: secs,
		ConsumedPerS: float64(max(0, last.committed-first.committed)) / secs,
		ProducedPerS: float64(max(0, last.hwm-first.hwm)) / secs}
	net := d.ConsumedPerS - d.ProducedPerS
	switch {
	case lag == 0 && d.ProducedPerS == 0:
		d.State = DrainIdle
	case lag == 0:
		d.State = DrainCaughtUp
	case d.ConsumedPerS == 0:
		d.State = DrainStuck
	case net > 0:
		d.State = DrainCatchingUp
		eta := float64(lag) / net
		d.Seconds = &eta
	case net < 0 && last.hwm-last.committed > first.hwm-first.committed:
		d.State = DrainFallingBehind
	default:
		d.State = DrainHolding
	}
	return d
}

// groupDrain sums the partitions up: the group is drained when its
// slowest partition is, falls behind when any lagging one does.
func groupDrain(rows []GroupPartition) (*float64, *Drain) {
	var age *float64
	d := Drain{State: DrainIdle}
	rank := map[string]int{DrainIdle: 0, DrainCaughtUp: 1, DrainHolding: 2, DrainCatchingUp: 3, DrainUnknown: 4, DrainStuck: 5, DrainFallingBehind: 6}
	for _, r := range rows {
		if r.LagSeconds != nil && (age == nil || *r.LagSeconds > *age) {
			v := *r.LagSeconds
			age = &v
		}
		if r.Drain == nil {
			continue
		}
		d.ConsumedPerS += r.Drain.ConsumedPerS
		d.ProducedPerS += r.Drain.ProducedPerS
		d.WindowSeconds = max(d.WindowSeconds, r.Drain.WindowSeconds)
		if rank[r.Drain.State] > rank[d.State] {
			d.State = r.Drain.State
		}
		if r.Drain.Seconds != nil && (d.Seconds == nil || *r.Drain.Seconds > *d.Seconds) {
			v := *r.Drain.Seconds
			d.Seconds = &v
		}
	}
	if len(rows) == 0 {
		return nil, nil
	}
	if d.State != DrainCatchingUp {
		d.Seconds = nil
	}
	return age, &d
}

// ageRound reads the oldest unconsumed record of every due partition with
// the lag reader's client (made on first use; closed by closeAgeReader).
func (s *Source) ageRound(ctx context.Context) {
	now := time.Now()
	rows, _ := s.groupPartitions(s.partitionRows(), nil)
	at, _, _, _ := s.offsets.snapshot()
	targets := s.offsets.clock.round(now, at, rows)
	if len(targets) == 0 {
		return
	}
	cl, err := s.ageReader()
	if err != nil {
		return
	}
	rctx, cancel := context.WithTimeout(ctx, ageReadTimeout)
	defer cancel()
	left := make(map[int32]*ageTarget, len(targets))
	assign := make(map[int32]kgo.Offset, len(targets))
	for i := range targets {
		left[targets[i].p] = &targets[i]
		assign[targets[i].p] = kgo.NewOffset().At(targets[i].offset)
	}
	cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{s.topic: assign})
	defer cl.RemoveConsumePartitions(map[string][]int32{s.topic: slices.Collect(maps.Keys(assign))})
	for len(left) > 0 && rctx.Err() == nil {
		fetches := cl.PollFetches(rctx)
		fetches.EachRecord(func(rec *kgo.Record) {
			t := left[rec.Partition]
			if t == nil || rec.Offset < t.offset {
				return
			}
			if rec.Attrs.IsControl() {
				if rec.Offset+1 >= t.hwm { // only markers up to the end: nothing to consume
					s.offsets.clock.note(time.Now(), t.p, t, 0)
					delete(left, t.p)
				}
				return
			}
			s.offsets.clock.note(time.Now(), t.p, t, rec.Timestamp.UnixMilli())
			delete(left, t.p)
		})
	}
	for p := range left {
		s.offsets.clock.note(now, p, nil, 0)
	}
}

// ageReader is the lag loop's group-less reader of the source topic, at
// the consumer's isolation.
func (s *Source) ageReader() (*kgo.Client, error) {
	s.offsets.mu.Lock()
	defer s.offsets.mu.Unlock()
	if s.offsets.reader != nil {
		return s.offsets.reader, nil
	}
	copts, err := kconn.Opts(s.wcfg.SourceConn())
	if err != nil {
		return nil, err
	}
	opts := append([]kgo.Opt{kgo.FetchMaxWait(100 * time.Millisecond)}, copts...)
	opts = append(opts,
		kgo.ClientID("svc-"+s.wcfg.Worker.Name+"-lag"),
		kgo.KeepControlRecords(),
		kgo.MaxConcurrentFetches(1),
		kgo.FetchMaxBytes(ageFetchBytes),
		kgo.FetchMaxPartitionBytes(ageFetchBytes),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	)
	if s.c.transactional() {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	s.offsets.reader = cl
	return cl, nil
}

// closeAgeReader closes the lag reader when the lag loop ends.
func (s *Source) closeAgeReader() {
	s.offsets.mu.Lock()
	cl := s.offsets.reader
	s.offsets.reader = nil
	s.offsets.mu.Unlock()
	if cl != nil {
		cl.Close()
	}
}
