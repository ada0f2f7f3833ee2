package kafka

import (
	"sort"

	"github.com/twmb/franz-go/pkg/kgo"
)

// partState tracks one assigned partition: the offsets polled, in order,
// and which finished (the commit point is the highest contiguous finished
// offset + 1), and its queues. Guarded by the source's mutex.
type partState struct {
	id          int32
	pending     []pendingOffset // ascending offsets, oldest first, from head
	head        int
	commit      kgo.EpochOffset // next offset to commit; Offset -1 when nothing finished yet
	sent        int64           // last committed offset, -1 before the first commit
	inflight    int             // messages polled and neither finished nor dropped
	stalled     bool            // DLQ send failed under "stall": offsets frozen
	stallPaused bool            // the stall paused fetching and is counted in the gauge
	drained     chan struct{}   // closed when inflight reaches 0 while someone waits
	outbox      []stagedMsg     // exactly-once: finished messages' staged results, in finishing order
	queues
}

type pendingOffset struct {
	offset int64
	epoch  int32
	done   bool
}

func newPartState(id int32) *partState {
	return &partState{id: id, commit: kgo.EpochOffset{Epoch: -1, Offset: -1}, sent: -1, queues: newQueues()}
}

// add registers a polled offset; offsets arrive in ascending order.
func (p *partState) add(offset int64, epoch int32) {
	p.pending = append(p.pending, pendingOffset{offset: offset, epoch: epoch})
	p.inflight++
}

// finish marks offset done (unless the partition stalled) and advances the
// commit point over every contiguous finished offset.
func (p *partState) finish(offset int64) {
	p.release()
	if p.stalled {
		return
	}
	live := p.pending[p.head:]
	if i := sort.Search(len(live), func(i int) bool { return live[i].offset >= offset }); i < len(live) && live[i].offset == offset {
		live[i].done = true
	}
	for p.head < len(p.pending) && p.pending[p.head].done {
		e := p.pending[p.head]
		p.commit = kgo.EpochOffset{Epoch: e.epoch, Offset: e.offset + 1}
		p.head++
	}
	if p.head > 1024 && p.head*2 > len(p.pending) {
		p.pending = append(p.pending[:0], p.pending[p.head:]...)
		p.head = 0
	}
}

// release forgets a message that will not finish here: the commit point
// stays below it.
func (p *partState) release() {
	p.inflight--
	if p.inflight == 0 && p.drained != nil {
		close(p.drained)
		p.drained = nil
	}
}

// abandon releases an offset of a partition that stalled.
func (p *partState) abandon() {
	p.stalled = true
	p.release()
}

// committable returns the commit point when it moved since the last commit.
func (p *partState) committable() (kgo.EpochOffset, bool) {
	if p.commit.Offset < 0 || p.commit.Offset == p.sent {
		return kgo.EpochOffset{}, false
	}
	return p.commit, true
}

// waitDrained returns a channel closed once nothing of p is in flight.
func (p *partState) waitDrained() <-chan struct{} {
	if p.inflight == 0 {
		c := make(chan struct{})
		close(c)
		return c
	}
	if p.drained == nil {
		p.drained = make(chan struct{})
	}
	return p.drained
}
