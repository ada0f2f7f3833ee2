package sink

import (
	"context"
	"errors"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
)

// errClosed is a record produced alone once the sinks closed.
var errClosed = errors.New("sink closed")

// aloneProducer sends records one at a time, each in a batch of its own:
// what a sink or the DLQ does with a record a broker refused in a batch
// as too large, to tell whether the record itself is. Its client is made
// at its first use: a worker whose brokers never refuse a batch keeps
// one client (and its connections) per sink.
type aloneProducer struct {
	opts []kgo.Opt
	stop context.Context // the sinks close: a record left with the client is given up
	sem  chan struct{}   // held from Produce until the answer

	mu      sync.Mutex
	cl      *kgo.Client
	closed  bool
	retired sync.WaitGroup // dropped clients being flushed and closed
}

func newAloneProducer(stop context.Context, opts []kgo.Opt) *aloneProducer {
	return &aloneProducer{opts: opts, stop: stop, sem: make(chan struct{}, 1)}
}

// produce sends rec through wait (which produces it on the client and
// waits for the answer or ctx), once the previous record has its
// answer, so no two records share a batch.
func (a *aloneProducer) produce(ctx context.Context, rec *kgo.Record, wait func(context.Context, *kgo.Client, *kgo.Record) error) error {
	select {
	case a.sem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	cl, err := a.client()
	if err != nil {
		<-a.sem
		return err
	}
	err = wait(ctx, cl, rec)
	if ctx.Err() == nil {
		<-a.sem
		return err
	}
	// The client may still hold rec: the next record waits until it is
	// answered (or the sinks close).
	go func() { _ = cl.Flush(a.stop); <-a.sem }()
	return err
}

func (a *aloneProducer) client() (*kgo.Client, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return nil, errClosed
	}
	if a.cl == nil {
		cl, err := kgo.NewClient(a.opts...)
		if err != nil {
			return nil, err
		}
		a.cl = cl
	}
	return a.cl, nil
}

// renew drops the client, if one was made, so that the next record gets
// a new one with the topic's limit as it is now (see producer); the old
// one is flushed and closed in the background.
func (a *aloneProducer) renew() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if old := a.cl; old != nil && !a.closed {
		a.cl = nil
		a.retired.Go(func() { flushClose(old) })
	}
}

// close flushes and closes the client, if one was made, and waits for
// the dropped ones.
func (a *aloneProducer) close() {
	a.mu.Lock()
	cl := a.cl
	a.closed = true
	a.mu.Unlock()
	if cl != nil {
		flushClose(cl)
	}
	a.retired.Wait()
}
