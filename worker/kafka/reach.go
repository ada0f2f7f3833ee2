package kafka

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// unreachableAfter is how long the consumer may go without an answer from
// any broker, with a failure since the last one, before the worker reports
// its brokers unreachable: a healthy consumer hears from one every fetch
// wait or heartbeat, so a blip of a few seconds never flips readiness.
const unreachableAfter = 10 * time.Second

// probeAfter is how long a silence without a failure lasts before the
// worker sends a metadata request itself: a client whose only request waits
// by design (a JoinGroup) or an idle one would see no failure even when
// every packet is dropped.
const (
	probeAfter   = 5 * time.Second
	probeTimeout = 4 * time.Second
)

// reach tracks from the client's hooks the last response read from any
// broker and the last failed read or connection attempt.
type reach struct {
	lastOK  atomic.Int64 // unix nanoseconds of the last response read
	lastBad atomic.Int64 // unix nanoseconds of the last failure
	mu      sync.Mutex
	lastErr string // the last failure's error
}

func newReach() *reach {
	r := &reach{}
	r.lastOK.Store(time.Now().UnixNano())
	return r
}

// OnBrokerRead implements kgo.HookBrokerRead.
func (r *reach) OnBrokerRead(_ kgo.BrokerMetadata, _ int16, _ int, _, _ time.Duration, err error) {
	if err == nil {
		r.lastOK.Store(time.Now().UnixNano())
		return
	}
	r.failed(err)
}

// OnBrokerConnect implements kgo.HookBrokerConnect.
func (r *reach) OnBrokerConnect(_ kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	if err != nil {
		r.failed(err)
	}
}

// failed records a failure; a request the client itself canceled (a poll
// ending, a commit given up) says nothing about the network.
func (r *reach) failed(err error) {
	if errors.Is(err, context.Canceled) {
		return
	}
	r.mu.Lock()
	r.lastErr = err.Error()
	r.mu.Unlock()
	r.lastBad.Store(time.Now().UnixNano())
}

// unreachable reports whether the brokers count as unreachable at now,
// since when (the last answer) and the last failure's error.
func (r *reach) unreachable(now time.Time) (bool, time.Time, string) {
	ok, bad := r.lastOK.Load(), r.lastBad.Load()
	since := time.Unix(0, ok)
	if bad <= ok || now.Sub(since) < unreachableAfter {
		return false, since, ""
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return true, since, r.lastErr
}

// quiet reports a silence of at least d with no failure in it.
func (r *reach) quiet(now time.Time, d time.Duration) bool {
	ok, bad := r.lastOK.Load(), r.lastBad.Load()
	return bad <= ok && now.Sub(time.Unix(0, ok)) >= d
}

// probe asks a broker for metadata: an answer is recorded by the client's
// hooks, a failure here.
func (s *Source) probe(ctx context.Context) {
	cl := s.client()
	if cl == nil {
		return // a transactional session restarting
	}
	pctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	err := cl.Ping(pctx)
	if err == nil || ctx.Err() != nil || errors.Is(err, kgo.ErrClientClosed) {
		return
	}
	s.reach.failed(fmt.Errorf("no broker answered a metadata request within %s: %w", probeTimeout, err))
}

// reachLoop checks the brokers' reachability every second until ctx ends,
// then clears any reason it set: readiness reason kafka_brokers, logs
// kafka_brokers_unreachable and kafka_brokers_reachable, state events.
func (s *Source) reachLoop(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	var down bool
	var downSince time.Time
	var probes sync.WaitGroup
	defer probes.Wait()
	var probing atomic.Bool
	for {
		select {
		case <-ctx.Done():
			if down {
				s.app.SetReady("kafka_brokers", "")
			}
			return
		case <-t.C:
		}
		now := time.Now()
		if s.reach.quiet(now, probeAfter) && probing.CompareAndSwap(false, true) {
			probes.Go(func() {
				defer probing.Store(false)
				s.probe(ctx)
			})
		}
		un, since, lastErr := s.reach.unreachable(now)
		switch {
		case un && !down:
			down, downSince = true, since
			at := since.UTC().Format(time.RFC3339)
			s.log.Warn("kafka_brokers_unreachable", "since", at, "silent_for", now.Sub(since).Round(time.Second).String(), "error", lastErr,
				"detail", "no broker has answered the consumer since then: nothing is fetched or committed until one does")
			s.app.Events().State("kafka_brokers_unreachable", map[string]any{"since": at, "error": lastErr})
			s.app.SetReady("kafka_brokers", fmt.Sprintf("unreachable since %s (no broker answered for %s; last error: %s)", at, now.Sub(since).Round(time.Second), lastErr))
		case !un && down:
			down = false
			s.log.Info("kafka_brokers_reachable", "since", downSince.UTC().Format(time.RFC3339), "unreachable_for", now.Sub(downSince).Round(time.Second).String())
			s.app.Events().State("kafka_brokers_reachable", map[string]any{"unreachable_for": now.Sub(downSince).Round(time.Second).String()})
			s.app.SetReady("kafka_brokers", "")
		}
	}
}
