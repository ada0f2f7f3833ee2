package sink

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kgo"
)

// errClosed is a record produced alone once the sinks closed.
var errClosed = errors.New("sink closed")

// aloneProducer sends records one at a time, each in a batch of its own,
// to tell whether a record a broker refused in a batch as too large is
// itself too large. Its client is made at its first use, so a worker
// whose brokers never refuse a batch keeps one client per sink.
type aloneProducer struct {
	*producer                 // lazy
	stop      context.Context // the sinks close: a record left with the client is given up
	sem       chan struct{}   // held from Produce until the answer
}

// produce sends rec through wait once the previous record has its answer,
// so no two records share a batch.
func (a *aloneProducer) produce(ctx context.Context, rec *kgo.Record, wait func(context.Context, *kgo.Client, *kgo.Record) error) error {
	select {
	case a.sem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	cl, err := a.lazyClient()
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

func (a *aloneProducer) lazyClient() (*kgo.Client, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return nil, errClosed
	}
	if cl := a.client(); cl != nil {
		return cl, nil
	}
	cl, err := kgo.NewClient(a.opts...)
	if err != nil {
		return nil, err
	}
	a.cur.Store(cl)
	return cl, nil
}
