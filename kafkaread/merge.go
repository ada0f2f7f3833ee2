package kafkaread

import (
	"github.com/twmb/franz-go/pkg/kgo"
)

// minQueueHigh is the least a partition may queue before its fetching
// pauses; pausing drops kgo's buffered records, which are fetched again
// after resume without loss or duplicates.
const minQueueHigh = 100

// partState is one partition of a stream: its window [start, end) where
// end is the snapshot high watermark, whether it still fetches, and the
// records fetched but not yet emitted.
type partState struct {
	start, end int64
	open       bool // still fetching: end not reached, no record past to_ts
	paused     bool
	queue      []*kgo.Record // copies (see detach)
	bytes      int           // size of the queued records
	rewind     int64         // >= 0: fetched records from this offset on were not queued; fetch them again
}

// merger orders a stream: it emits the queued record with the smallest
// (timestamp, partition, offset) once every open partition has a record
// queued, so the output is in timestamp order across partitions (which makes
// the spec's traversal by "last timestamp_ms + 1" gap-free) and in offset
// order within a partition. It is used by one goroutine.
type merger struct {
	topic   string
	toTS    *int64
	parts   map[int32]*partState
	closing []int32 // partitions to stop fetching at the next settle
	queued  int     // bytes queued over all partitions
	peak    int     // the most bytes ever queued (tests)
	sizer   *fetchSizer
}

func newMerger(topic string, toTS *int64, parts map[int32]*partState, sizer *fetchSizer) *merger {
	return &merger{topic: topic, toTS: toTS, parts: parts, sizer: sizer}
}

// push queues fetched records of partition p, closing p at its snapshot
// end or at its first record past to_ts. Control records (transaction
// markers) are never emitted but count towards reaching the end.
func (m *merger) push(p int32, recs []*kgo.Record) {
	ps := m.parts[p]
	if ps == nil {
		return
	}
	byteHigh := m.byteHigh()
	for _, rec := range recs {
		if !ps.open || ps.rewind >= 0 {
			return
		}
		if len(ps.queue) > 0 && ps.bytes+recordSize(rec) > byteHigh {
			// A fetch larger than this partition's share: keep what fits,
			// fetch the rest again once the client has read the queue.
			ps.rewind = rec.Offset
			return
		}
		switch {
		case rec.Offset >= ps.end:
			m.close(p, ps)
			return
		case rec.Attrs.IsControl():
		case m.toTS != nil && rec.Timestamp.UnixMilli() > *m.toTS:
			m.close(p, ps)
			return
		default:
			ps.queue = append(ps.queue, detach(rec))
			n := recordSize(rec)
			ps.bytes += n
			m.queued += n
			m.peak = max(m.peak, m.queued)
		}
		if rec.Offset+1 >= ps.end {
			m.close(p, ps)
		}
	}
}

func (m *merger) close(p int32, ps *partState) {
	ps.open = false
	m.closing = append(m.closing, p)
}

// settle stops fetching closed partitions, pauses open ones whose queue
// reached high records or its share of queueBudget, and sizes the next
// fetches.
func (m *merger) settle(cl *kgo.Client, high int) {
	byteHigh := m.byteHigh()
	if m.sizer != nil {
		m.sizer.resize(cl, byteHigh)
	}
	if len(m.closing) > 0 {
		cl.RemoveConsumePartitions(map[string][]int32{m.topic: m.closing})
		m.closing = nil
	}
	var pause []int32
	rewind := map[int32]kgo.EpochOffset{}
	for p, ps := range m.parts {
		if ps.open && !ps.paused && (len(ps.queue) >= high || ps.bytes >= byteHigh || ps.rewind >= 0) {
			ps.paused = true
			pause = append(pause, p)
		}
		if ps.open && ps.rewind >= 0 {
			rewind[p] = kgo.EpochOffset{Epoch: -1, Offset: ps.rewind}
			ps.rewind = -1
		}
	}
	if len(pause) > 0 {
		cl.PauseFetchPartitions(map[string][]int32{m.topic: pause})
	}
	if len(rewind) > 0 {
		cl.SetOffsets(map[string]map[int32]kgo.EpochOffset{m.topic: rewind})
	}
}

// pop returns the next record to emit, or false when an open partition has
// nothing queued (more must be fetched first) or nothing is left. A paused
// partition resumes once its queue falls below half of high, and always
// before it runs empty.
func (m *merger) pop(cl *kgo.Client, high int) (*kgo.Record, bool) {
	var best *partState
	for _, ps := range m.parts {
		if len(ps.queue) == 0 {
			if ps.open {
				return nil, false
			}
			continue
		}
		if best == nil || before(ps.queue[0], best.queue[0]) {
			best = ps
		}
	}
	if best == nil {
		return nil, false
	}
	rec := best.queue[0]
	best.queue[0] = nil
	best.queue = best.queue[1:]
	n := recordSize(rec)
	best.bytes -= n
	m.queued -= n
	if best.paused && len(best.queue) < max(high/2, 1) && best.bytes < m.byteHigh()/2 {
		best.paused = false
		cl.ResumeFetchPartitions(map[string][]int32{m.topic: {rec.Partition}})
	}
	return rec, true
}

// high is how many fetched records one open partition may queue before its
// fetching pauses: twice the records still to send, shared among the open
// partitions (at least minQueueHigh, at most remaining). All queues together
// stay under about twice the request's limit, so memory is bounded by the
// hard cap whatever the partition count, while a few partitions fetch in
// large runs without pause/refetch round trips.
func (m *merger) high(remaining int) int {
	open := 0
	for _, ps := range m.parts {
		if ps.open {
			open++
		}
	}
	h := 2 * remaining / max(open, 1)
	return min(remaining, max(h, minQueueHigh))
}

// byteHigh is how many bytes one open partition may queue before its
// fetching pauses: an even share of queueBudget, so a client that reads
// slowly holds the worker to about queueBudget queued (plus one record
// per partition, which ordering needs) whatever the window's size.
func (m *merger) byteHigh() int {
	open := 0
	for _, ps := range m.parts {
		if ps.open {
			open++
		}
	}
	return max(queueBudget/max(open, 1), 1)
}

// recordSize approximates the memory a queued record holds.
func recordSize(r *kgo.Record) int {
	n := len(r.Key) + len(r.Value)
	for _, h := range r.Headers {
		n += len(h.Key) + len(h.Value)
	}
	return n
}

// detach copies a fetched record so that queuing it holds only its own
// bytes. kgo hands out records whose key, value and header values are
// views into the whole fetch response (or decompressed batch), and whose
// struct sits in an array of the whole batch: one queued view would keep
// all of that alive, and one per partition would hold a fetch per
// partition.
func detach(r *kgo.Record) *kgo.Record {
	c := *r
	buf := make([]byte, 0, recordSize(r))
	clone := func(b []byte) []byte {
		if b == nil {
			return nil
		}
		buf = append(buf, b...)
		return buf[len(buf)-len(b) : len(buf) : len(buf)]
	}
	c.Key = clone(r.Key)
	c.Value = clone(r.Value)
	if r.Headers != nil {
		c.Headers = make([]kgo.RecordHeader, len(r.Headers))
		for i, h := range r.Headers {
			c.Headers[i] = kgo.RecordHeader{Key: h.Key, Value: clone(h.Value)}
		}
	}
	return &c
}

// finished reports whether every partition is closed and drained.
func (m *merger) finished() bool {
	for _, ps := range m.parts {
		if ps.open || len(ps.queue) > 0 {
			return false
		}
	}
	return true
}

// before orders records by timestamp, then partition, then offset.
func before(a, b *kgo.Record) bool {
	ta, tb := a.Timestamp.UnixMilli(), b.Timestamp.UnixMilli()
	if ta != tb {
		return ta < tb
	}
	if a.Partition != b.Partition {
		return a.Partition < b.Partition
	}
	return a.Offset < b.Offset
}
