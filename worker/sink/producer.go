package sink

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"svc/worker/kconn"
)

// outlet is how a sink or the DLQ produces to its topic: its producer,
// the alone producer for records a broker refused in a batch, and the
// topic's limit, which both producers' batch caps follow.
type outlet struct {
	cl    *producer
	alone *aloneProducer
	limit *topicLimit
}

// newOutlet builds the producers for conn (idempotent, acks=all, batches
// in codec, capped at limit); conn's client.id and linger.ms override
// clientID and linger, and the alone producer never lingers.
func newOutlet(stop context.Context, conn kconn.Conn, clientID string, linger, deliveryTimeout time.Duration, codec string, limit *topicLimit) (outlet, error) {
	connOpts, err := kconn.Opts(conn)
	if err != nil {
		return outlet{}, err
	}
	opts := slices.Concat([]kgo.Opt{kgo.ClientID(clientID), kgo.ProducerLinger(linger), kgo.ProducerBatchMaxBytesFn(limit.batchMax)}, connOpts, []kgo.Opt{
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordDeliveryTimeout(max(deliveryTimeout, time.Second)), // kgo refuses less than 1 s; our own timers still apply the configured value
		kgo.ProducerBatchCompression(compression(codec)...),
	})
	cl, err := newProducer(opts, false)
	if err != nil {
		return outlet{}, err
	}
	alone, _ := newProducer(append(opts[:len(opts):len(opts)], kgo.ProducerLinger(0)), true)
	o := outlet{cl: cl, alone: &aloneProducer{producer: alone, stop: stop, sem: make(chan struct{}, 1)}, limit: limit}
	limit.client = cl.client
	limit.onChange = func() {
		cl.renew()
		alone.renew()
	}
	return o, nil
}

// produce sends rec through on, again on the new client when renew
// replaced the one it went to before it was sent.
func (o *outlet) produce(ctx context.Context, rec *kgo.Record, on func(context.Context, *kgo.Client, *kgo.Record) error) error {
	for {
		cl := o.cl.client()
		err := on(ctx, cl, rec)
		if !o.cl.replaced(cl, err) {
			return err
		}
	}
}

// close flushes and closes both producers at once.
func (o *outlet) close() {
	var wg sync.WaitGroup
	wg.Go(o.cl.close)
	wg.Go(o.alone.close)
	wg.Wait()
}

// producer is a producer client, replaced when its topic's limit changes
// (renew): franz-go caps a partition's batches at the limit it read when
// it first produced there and never reads it again, so with the old
// client a lowered limit would have every batch refused, and a raised one
// would leave larger records refused by the client itself.
type producer struct {
	opts []kgo.Opt
	lazy bool // no client until one is asked for (aloneProducer), nor after renew
	cur  atomic.Pointer[kgo.Client]

	mu      sync.Mutex
	closed  bool
	retired sync.WaitGroup // replaced clients being flushed and closed
}

func newProducer(opts []kgo.Opt, lazy bool) (*producer, error) {
	p := &producer{opts: opts, lazy: lazy}
	if !lazy {
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			return nil, err
		}
		p.cur.Store(cl)
	}
	return p, nil
}

// client is the current client.
func (p *producer) client() *kgo.Client { return p.cur.Load() }

// renew replaces the client by a new one (none for a lazy producer) that
// reads the topic's limit as it is now; the old one is flushed and closed
// in the background (what it then still holds fails: see replaced).
func (p *producer) renew() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	var cl *kgo.Client
	if !p.lazy {
		var err error
		if cl, err = kgo.NewClient(p.opts...); err != nil {
			return // the same options made the first client: not expected; the old one stays
		}
	}
	if old := p.cur.Swap(cl); old != nil {
		p.retired.Go(func() { flushClose(old) })
	}
}

// replaced reports whether err is cl's refusal because renew replaced it:
// the record goes again on the current client, no failure counted.
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
	cl := p.client()
	p.mu.Unlock()
	if cl != nil {
		flushClose(cl)
	}
	p.retired.Wait()
}
