package sink

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"svc/worker/model"
)

// DeliverAsync delivers res as Deliver does without holding its caller:
// done is called exactly once, with what Deliver would have returned, on
// another goroutine. An ok result for one sink whose breaker is closed and
// whose topic limit is known is finished in the producer's acknowledgement
// (no goroutine waits per result); everything else goes the synchronous
// way on a goroutine of its own. Slow produces count as in Deliver (seen
// by a sweep); when ctx ends, done gets ctx.Err() at once.
func (ss *Set) DeliverAsync(ctx context.Context, res *model.TaskResult, done func(error)) {
	if res.Status == model.StatusOK && ctx.Err() == nil {
		if targets, unknown := ss.targets(res, true); unknown == 0 && len(targets) == 1 && targets[0].limit.ready() {
			var buf [1]sinkRecord
			recs, large, err := ss.records(ctx, res, targets, buf[:0])
			if err == nil && len(large) == 0 && ss.produceAsync(ctx, recs[0], res, done) {
				return
			}
		}
	}
	go func() { done(ss.Deliver(ctx, res)) }()
}

// asyncProduce is one result produced by DeliverAsync's fast path.
type asyncProduce struct {
	ss   *Set
	s    *kafkaSink
	ctx  context.Context
	res  *model.TaskResult
	done func(error)

	at    time.Time    // when it was produced
	cl    *kgo.Client  // the client it was produced on
	limit int          // the topic's limit then (the cap of its batch)
	ended atomic.Bool  // acknowledged or cancelled: done was (or is being) called
	due   atomic.Int64 // when it is slow (Unix ns): one more delivery_timeout unacknowledged
}

// produceAsync produces res's record r, or returns false (nothing sent)
// when the breaker does not let a call out now.
func (ss *Set) produceAsync(ctx context.Context, r sinkRecord, res *model.TaskResult, done func(error)) bool {
	s := r.s
	if !s.breaker.TryAcquire() {
		return false
	}
	a := &asyncProduce{ss: ss, s: s, ctx: ctx, res: res, done: done, at: time.Now()}
	a.due.Store(a.at.Add(s.timeout).UnixNano())
	if !ss.watch(ctx, a) {
		s.breaker.Release()
		return false
	}
	a.cl, a.limit = s.cl.client(), s.limit.get()
	a.cl.Produce(ctx, r.rec, a.ack)
	return true
}

// end marks a finished (false when it already was) and takes it out of
// the pending deliveries.
func (a *asyncProduce) end() bool {
	if !a.ended.CompareAndSwap(false, true) {
		return false
	}
	a.ss.pendMu.Lock()
	delete(a.ss.pending, a)
	a.ss.pendMu.Unlock()
	return true
}

// ack is the producer's acknowledgement.
func (a *asyncProduce) ack(_ *kgo.Record, err error) {
	if !a.end() {
		return // cancelled meanwhile: done already has ctx's error
	}
	s := a.s
	switch {
	case err == nil:
		s.breaker.Success()
		s.delivered.Inc()
		a.ss.events.Delivered(a.res, s.name)
		a.done(nil)
		return
	case a.ctx.Err() != nil:
		s.breaker.Release()
		a.done(a.ctx.Err())
		return
	case s.cl.replaced(a.cl, err): // produced again on the new client, no failure
		s.breaker.Release()
		go func() { a.done(a.ss.Deliver(a.ctx, a.res)) }()
		return
	case isTooLarge(err): // not the sink's fault: deliver judges the refusal
		s.breaker.Release()
		r := &refusal{at: a.at, limit: a.limit, err: err}
		go func() { a.done(a.ss.deliver(a.ctx, a.res, s, r)) }()
		return
	}
	// A failed produce: counted as in deliver, then retried the
	// synchronous way after the first backoff.
	const backoff = 100 * time.Millisecond
	s.m.failures.WithLabelValues(s.name).Inc()
	s.breaker.Failure()
	s.log.Warn("sink_delivery_failed", "sink", s.name, "error", err.Error(), "retry_in", backoff.String())
	go func() {
		t := time.NewTimer(backoff)
		defer t.Stop()
		select {
		case <-t.C:
			a.done(a.ss.Deliver(a.ctx, a.res))
		case <-a.ctx.Done():
			a.done(a.ctx.Err())
		}
	}()
}

// slowIfDue notes a slow delivery when a is still unacknowledged at its
// due time, and moves that one delivery_timeout on.
func (a *asyncProduce) slowIfDue(now time.Time) {
	if a.ended.Load() || now.UnixNano() < a.due.Load() {
		return
	}
	a.s.slowDelivery()
	a.due.Store(now.Add(a.s.timeout).UnixNano())
}

// watch adds a to the pending deliveries, the first time making sure the
// end of ctx ends them and the sweep runs; any other context (one is
// watched: the worker's task context) goes the synchronous way.
func (ss *Set) watch(ctx context.Context, a *asyncProduce) bool {
	ss.pendMu.Lock()
	defer ss.pendMu.Unlock()
	if ss.watched == nil {
		ss.watched = ctx
		ss.pending = map[*asyncProduce]struct{}{}
		context.AfterFunc(ctx, ss.cancelPending)
		every := time.Hour
		for _, s := range ss.sinks {
			every = min(every, s.timeout/4)
		}
		go ss.sweep(max(every, 10*time.Millisecond))
	}
	if ss.watched != ctx {
		return false
	}
	ss.pending[a] = struct{}{}
	return true
}

// sweep looks for slow pending deliveries every quarter of the shortest
// delivery_timeout (a timer per delivery cost more than the look), until
// the set closes.
func (ss *Set) sweep(every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	var all []*asyncProduce
	for {
		select {
		case <-ss.stopCtx.Done():
			return
		case now := <-t.C:
			all = ss.pendingList(all[:0])
			for _, a := range all {
				a.slowIfDue(now)
			}
			clear(all)
		}
	}
}

// pendingList appends the pending deliveries to all.
func (ss *Set) pendingList(all []*asyncProduce) []*asyncProduce {
	ss.pendMu.Lock()
	defer ss.pendMu.Unlock()
	for a := range ss.pending {
		all = append(all, a)
	}
	return all
}

// cancelPending ends every pending delivery with its context's error: its
// message stays uncommitted, as Deliver leaves it when its context ends.
func (ss *Set) cancelPending() {
	for _, a := range ss.pendingList(nil) {
		if a.end() {
			a.s.breaker.Release()
			a.done(a.ctx.Err())
		}
	}
}
