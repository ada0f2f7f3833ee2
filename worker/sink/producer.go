package sink

import (
	"errors"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kgo"
)

// producer is a sink's or the DLQ's producer client, replaced when its
// topic's limit changes (renew). franz-go caps a partition's batches at
// the limit it read when it first produced there and never reads it
// again: with the old client, a lowered limit would have every batch of
// small records refused (and each record tried alone) for as long as the
// worker runs, and a raised one would leave larger records refused by
// the client itself.
type producer struct {
	opts []kgo.Opt
	cur  atomic.Pointer[kgo.Client]

	mu      sync.Mutex
	closed  bool
	retired sync.WaitGroup // replaced clients being flushed and closed
}

func newProducerClient(opts []kgo.Opt) (*producer, error) {
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	p := &producer{opts: opts}
	p.cur.Store(cl)
	return p, nil
}

// client is the current client.
func (p *producer) client() *kgo.Client { return p.cur.Load() }

// renew replaces the client by a new one, which reads the topic's limit
// as it is now; the old one is flushed and closed in the background (the
// records it holds are answered there; any it then still holds fail with
// kgo.ErrClientClosed, and replaced tells their senders to go again).
func (p *producer) renew() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	cl, err := kgo.NewClient(p.opts...)
	if err != nil {
		return // the same options made the first client: not expected; the old one stays
	}
	old := p.cur.Swap(cl)
	p.retired.Go(func() { flushClose(old) })
}

// replaced reports whether err is cl's refusal because renew replaced it:
// the record is to be produced again on the current client, with no
// failure counted.
func (p *producer) replaced(cl *kgo.Client, err error) bool {
	if !errors.Is(err, kgo.ErrClientClosed) || p.client() == cl {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.closed
}

// close flushes and closes the client, and waits for the replaced ones.
func (p *producer) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	flushClose(p.client())
	p.retired.Wait()
}
