package kafkaread

import (
	"sort"

	"github.com/twmb/franz-go/pkg/kgo"
)

// minQueueHigh is the least a partition may queue before its fetching
// pauses.
const minQueueHigh = 100

// maxEntries bounds the entries one partition queues, stand-ins included;
// the rest of a fetch past it is fetched again.
const maxEntries = 4 * MaxStreamRecords

// entry is one queued record: a copy (rec), or a stand-in (rec nil) for a
// record that did not fit in queueBudget, read again (fill) in its turn.
type entry struct {
	rec       *kgo.Record // nil: a stand-in
	ts        int64       // timestamp, epoch ms
	partition int32
	offset    int64
	size      int // the record's bytes (recordSize), stand-in or not
}

// partState is one partition of a stream: its window [start, end) (end is
// the snapshot high watermark) and the records fetched but not emitted.
type partState struct {
	start, end int64
	open       bool // still fetching: end not reached, no record past to_ts
	paused     bool
	queue      []entry
	bytes      int   // size of the queued records, stand-ins included (the pause threshold)
	next       int64 // the offset after the last record queued (0: none yet)
	rewind     int64 // >= 0: fetched records from this offset on were not queued; fetch them again
}

// merger orders a stream: it emits the queued record with the smallest
// (timestamp, partition, offset) once every open partition has one queued,
// so the output is in timestamp order across partitions (the spec's
// traversal by "last timestamp_ms + 1" is gap-free) and offset order within
// one. The copies it queues weigh at most queueBudget; the rest are
// stand-ins. Used by one goroutine.
type merger struct {
	topic   string
	toTS    *int64
	parts   map[int32]*partState
	unfetch []int32 // closed or newly streamed partitions the client stops fetching at the next settle
	queued  int     // bytes of the copies queued over all partitions
	peak    int     // the most bytes ever queued (tests)
	sizer   *fetchSizer
	fills   int // stand-ins read again (tests)
	// streamed partitions have batches too large for the client to
	// decompress whole: the stream reads them itself (readStreamed).
	streamed map[int32]bool
}

func newMerger(topic string, toTS *int64, parts map[int32]*partState, sizer *fetchSizer) *merger {
	return &merger{topic: topic, toTS: toTS, parts: parts, sizer: sizer, streamed: map[int32]bool{}}
}

// push queues fetched records of partition p, closing p at its snapshot
// end or its first record past to_ts. Control records are never emitted
// but count towards the end; records already queued are skipped.
func (m *merger) push(p int32, recs []*kgo.Record) {
	ps := m.parts[p]
	if ps == nil {
		return
	}
	for _, rec := range recs {
		if !m.pushOne(p, ps, rec) {
			return
		}
	}
}

// pushOne is push for one record; false: p takes no more of this fetch.
func (m *merger) pushOne(p int32, ps *partState, rec *kgo.Record) bool {
	if !ps.open || ps.rewind >= 0 {
		return false
	}
	if rec.Offset < ps.next {
		return true
	}
	if len(ps.queue) >= maxEntries {
		ps.rewind = rec.Offset // fetched again once the queue has room
		return false
	}
	switch {
	case rec.Offset >= ps.end:
		m.close(p, ps)
		return false
	case rec.Attrs.IsControl():
	case m.toTS != nil && rec.Timestamp.UnixMilli() > *m.toTS:
		m.close(p, ps)
		return false
	default:
		n := recordSize(rec)
		e := entry{ts: rec.Timestamp.UnixMilli(), partition: p, offset: rec.Offset, size: n}
		if m.queued+n <= queueBudget {
			e.rec = detach(rec)
			m.queued += n
			m.peak = max(m.peak, m.queued)
		}
		ps.queue = append(ps.queue, e)
		ps.bytes += n
	}
	ps.next = rec.Offset + 1
	if rec.Offset+1 >= ps.end {
		m.close(p, ps)
		return false
	}
	return true
}

// readFunc is refetcher.records, bounded and classified by the stream.
type readFunc func(p int32, offset int64, maxBytes int32, each func(*kgo.Record) bool) (next int64, err error)

// stream hands partition p over to readStreamed (kconn.ErrLargeBatch).
func (m *merger) stream(p int32) {
	if ps := m.parts[p]; ps != nil && ps.open && !m.streamed[p] {
		m.streamed[p] = true
		m.unfetch = append(m.unfetch, p)
	}
}

// readStreamed queues the next records of a streamed partition (one
// fetch), closing it when nothing more is there.
func (m *merger) readStreamed(p int32, ps *partState, read readFunc) error {
	from := max(ps.next, ps.start)
	next, err := read(p, from, fetchBudget, func(rec *kgo.Record) bool {
		if len(ps.queue) >= maxEntries {
			return false // read on from here once the queue has room
		}
		return m.pushOne(p, ps, rec)
	})
	if err != nil || !ps.open {
		return err
	}
	if next <= from && len(ps.queue) == 0 {
		m.close(p, ps) // nothing there any more
		return nil
	}
	ps.next = max(ps.next, next)
	if ps.next >= ps.end {
		m.close(p, ps)
	}
	return nil
}

func (m *merger) close(p int32, ps *partState) {
	ps.open = false
	m.unfetch = append(m.unfetch, p)
}

// settle sizes the next fetches, stops fetching closed and streamed
// partitions, pauses those whose queue reached high records or its share
// of queueBudget, and rewinds those cut short.
func (m *merger) settle(cl *kgo.Client, high int) {
	byteHigh := m.byteHigh()
	if m.sizer != nil {
		m.sizer.resize(cl, byteHigh)
	}
	if len(m.unfetch) > 0 {
		cl.RemoveConsumePartitions(map[string][]int32{m.topic: m.unfetch})
		m.unfetch = nil
	}
	var pause []int32
	rewind := map[int32]kgo.EpochOffset{}
	for p, ps := range m.parts {
		if m.streamed[p] {
			ps.rewind = -1 // readStreamed reads on from ps.next
			continue
		}
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

// head returns the partition whose first queued record is next; nil when
// an open partition has nothing queued or nothing is left.
func (m *merger) head() *partState {
	var best *partState
	for _, ps := range m.parts {
		if len(ps.queue) == 0 {
			if ps.open {
				return nil
			}
			continue
		}
		if best == nil || before(ps.queue[0], best.queue[0]) {
			best = ps
		}
	}
	return best
}

// pop returns the next record to emit, or false as head gives nil. A
// stand-in is read first (with what then fits of its batch), or
// dropped when its record is gone. A paused partition resumes once its
// queue falls below half of high.
func (m *merger) pop(cl *kgo.Client, high int, read readFunc) (*kgo.Record, bool, error) {
	for {
		best := m.head()
		if best == nil {
			return nil, false, nil
		}
		if best.queue[0].rec == nil {
			// A fetch of 1 byte: the batch holding the offset.
			if _, err := read(best.queue[0].partition, best.queue[0].offset, 1, m.filler(best)); err != nil {
				return nil, false, err
			}
			m.fills++
			if best.queue[0].rec == nil { // gone
				m.drop(best)
				continue
			}
		}
		rec := m.drop(best)
		if best.paused && !m.streamed[rec.Partition] && len(best.queue) < max(high/2, 1) && best.bytes < m.byteHigh()/2 {
			best.paused = false
			cl.ResumeFetchPartitions(map[string][]int32{m.topic: {rec.Partition}})
		}
		return rec, true, nil
	}
}

// drop removes and returns the head entry's record of ps (nil: stand-in).
func (m *merger) drop(ps *partState) *kgo.Record {
	e := ps.queue[0]
	ps.queue[0] = entry{}
	ps.queue = ps.queue[1:]
	ps.bytes -= e.size
	if e.rec != nil {
		m.queued -= e.size
	}
	return e.rec
}

// filler returns the function that replaces stand-ins of ps by the
// records read again: always the first, the next while they fit in
// queueBudget. A stand-in whose record is gone stays one (pop drops it).
func (m *merger) filler(ps *partState) func(*kgo.Record) bool {
	first := true
	return func(rec *kgo.Record) bool {
		j := sort.Search(len(ps.queue), func(k int) bool { return ps.queue[k].offset >= rec.Offset })
		if j == len(ps.queue) {
			return false
		}
		e := &ps.queue[j]
		if e.offset != rec.Offset || e.rec != nil {
			return true
		}
		if !first && m.queued+e.size > queueBudget {
			return false
		}
		first = false
		e.rec = detach(rec)
		m.queued += e.size
		m.peak = max(m.peak, m.queued)
		return true
	}
}

// high is how many records one open partition may queue before its
// fetching pauses: twice the records still to send, shared among the open
// partitions, within [minQueueHigh, remaining].
func (m *merger) high(remaining int) int {
	return min(remaining, max(2*remaining/m.open(), minQueueHigh))
}

// byteHigh is how many bytes one open partition may queue before its
// fetching pauses: an even share of queueBudget.
func (m *merger) byteHigh() int { return max(queueBudget/m.open(), 1) }

// open counts the open partitions, at least 1.
func (m *merger) open() int {
	n := 0
	for _, ps := range m.parts {
		if ps.open {
			n++
		}
	}
	return max(n, 1)
}

// recordSize approximates the memory a queued record holds.
func recordSize(r *kgo.Record) int {
	n := len(r.Key) + len(r.Value)
	for _, h := range r.Headers {
		n += len(h.Key) + len(h.Value)
	}
	return n
}

// detach copies a fetched record into one buffer: kgo's records are views
// into the whole fetch, which a queued view would keep alive.
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
func before(a, b entry) bool {
	if a.ts != b.ts {
		return a.ts < b.ts
	}
	if a.partition != b.partition {
		return a.partition < b.partition
	}
	return a.offset < b.offset
}
