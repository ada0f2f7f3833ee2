package sink

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"svc/worker/config"
	"svc/worker/model"
)

// Set delivers results to the named sinks and failures to the DLQ; it is
// the worker's Deliverer.
type Set struct {
	name    string // the worker name, in every record's svc-worker header
	sinks   []*kafkaSink
	byName  map[string]*kafkaSink
	dlq     *DLQ
	log     *slog.Logger
	m       *sinkMetrics
	events  *model.Events
	stop    context.CancelFunc // ends stopCtx: the topic limit lookups and the sweep
	stopCtx context.Context
	closed  sync.Once

	// DeliverAsync's unacknowledged produces, and the context whose end
	// cancels them (async.go).
	pendMu  sync.Mutex
	pending map[*asyncProduce]struct{}
	watched context.Context
}

var _ model.Deliverer = (*Set)(nil)

// New builds a producer and a breaker per [[sinks.kafka]] entry, and the
// DLQ's when one exists; no broker is contacted until the first delivery.
// events may be nil.
func New(cfg *config.Config, reg prometheus.Registerer, events *model.Events, log *slog.Logger) (*Set, error) {
	stop, cancel := context.WithCancel(context.Background())
	ss := &Set{name: cfg.Worker.Name, byName: map[string]*kafkaSink{}, log: log, m: newSinkMetrics(reg), events: events, stop: cancel, stopCtx: stop}
	for i, sc := range cfg.Sinks.Kafka {
		timeout := sc.DeliveryTimeout.D()
		limit := newTopicLimit(stop, "sink "+sc.Name, sc.Topic, sc.MaxMessageBytes, int(cfg.Executor.MaxOutputBytes), log)
		out, err := newOutlet(stop, cfg.SinkConn(i), "svc-sink", defaultLinger(cfg), 2*timeout, sc.Compression, limit)
		if err != nil {
			ss.Close()
			return nil, fmt.Errorf("sink %q: %w", sc.Name, err)
		}
		name := sc.Name
		s := &kafkaSink{name: name, codec: sc.Compression, forward: sc.ForwardHeaders, topic: sc.Topic, outlet: out, timeout: timeout, log: log, m: ss.m,
			delivered: ss.m.delivered.WithLabelValues(name)}
		s.breaker = NewBreaker(sc.Breaker.FailureThreshold, sc.Breaker.OpenTimeout.D(), func(from, to State) {
			ss.m.state.WithLabelValues(name).Set(float64(to))
			ss.m.transitions.WithLabelValues(name, to.String()).Inc()
			log.Warn("sink_breaker_"+to.String(), "sink", name, "from", from.String())
			events.State("sink_breaker_"+to.String(), map[string]any{"sink": name, "from": from.String()})
		})
		ss.m.addSink(name)
		ss.sinks = append(ss.sinks, s)
		ss.byName[name] = s
	}
	dlq, err := newDLQ(stop, cfg, ss.m, events, log)
	if err != nil {
		ss.Close()
		return nil, err
	}
	ss.dlq = dlq
	return ss, nil
}

// Deliver sends an ok result to its sinks (every sink, or the task's named
// ones) and a failed one to the DLQ; an ok result too large for some sink
// goes to the DLQ too, once the others have it. It returns nil once the
// result is out, model.ErrDeliveryStalled (dlq.on_send_failure = "stall"),
// or ctx.Err().
func (ss *Set) Deliver(ctx context.Context, res *model.TaskResult) error {
	return ss.deliver(ctx, res, nil, nil)
}

// deliver is Deliver; refused, when not nil, is a broker's refusal of
// res's record for the sink to (DeliverAsync's fast path).
func (ss *Set) deliver(ctx context.Context, res *model.TaskResult, to *kafkaSink, refused *refusal) error {
	if res.Status != model.StatusOK {
		return ss.dlq.Send(ctx, res)
	}
	var buf [1]sinkRecord // on the stack: one sink's record allocates nothing here
	targets, _ := ss.targets(res, false)
	recs, large, err := ss.records(ctx, res, targets, buf[:0])
	if err != nil {
		return err
	}
	one := func(r sinkRecord) error {
		refused := refused
		if r.s != to {
			refused = nil
		}
		err := r.s.deliver(ctx, r.rec, r.size, func() *kgo.Record { return resultRecord(r.s.topic, ss.name, r.s.forward, res) }, refused)
		if err == nil {
			ss.events.Delivered(res, r.s.name)
		}
		return err
	}
	var errs []error
	if len(recs) == 1 {
		errs = []error{one(recs[0])}
	} else {
		ch := make(chan error, len(recs))
		for _, r := range recs {
			go func() { ch <- one(r) }()
		}
		for range recs {
			errs = append(errs, <-ch)
		}
	}
	for _, err := range errs {
		if tl, ok := errors.AsType[*TooLargeError](err); ok {
			large = append(large, tl)
		} else if err != nil {
			return err // ctx ended: the message stays uncommitted
		}
	}
	if len(large) == 0 {
		return nil
	}
	for _, tl := range large {
		ss.tooLarge(res, tl)
	}
	return ss.dlq.Send(ctx, tooLargeFailure(res, large))
}

// sinkRecord is an ok result's record for one of its sinks, within the
// sink's topic limit; size is its RecordSize.
type sinkRecord struct {
	s    *kafkaSink
	rec  *kgo.Record
	size int
}

// records appends the records of ok result res for targets to recs, the
// one step of every delivery path; one over its topic's limit is a
// *TooLargeError in large instead. err is ctx's, when it ended first.
func (ss *Set) records(ctx context.Context, res *model.TaskResult, targets []*kafkaSink, recs []sinkRecord) ([]sinkRecord, []*TooLargeError, error) {
	for _, s := range targets {
		s.limit.ready() // every lookup under way at once
	}
	var large []*TooLargeError
	for _, s := range targets {
		if err := s.limit.wait(ctx); err != nil {
			return nil, nil, err
		}
		rec := resultRecord(s.topic, ss.name, s.forward, res)
		size := RecordSize(rec)
		over, limit, err := s.limit.overLimit(ctx, size)
		switch {
		case err != nil:
			return nil, nil, err
		case over:
			large = append(large, &TooLargeError{Sink: s.name, Size: size, Limit: limit})
		default:
			recs = append(recs, sinkRecord{s, rec, size})
		}
	}
	return recs, large, nil
}

// tooLargeFailure is ok result res as the failure its message goes to
// the DLQ with: the reason names each sink it is too large for, sorted.
func tooLargeFailure(res *model.TaskResult, large []*TooLargeError) *model.TaskResult {
	reasons := make([]string, len(large))
	for i, tl := range large {
		reasons[i] = tl.Error()
	}
	slices.Sort(reasons)
	failed := *res
	failed.Status, failed.Err = model.StatusFailed, errors.New(strings.Join(reasons, "; "))
	return &failed
}

// tooLarge counts and logs a result too large for a sink's topic.
func (ss *Set) tooLarge(res *model.TaskResult, tl *TooLargeError) {
	ss.m.tooLarge.WithLabelValues(tl.Sink).Inc()
	attrs := []any{"sink", tl.Sink, "topic", ss.byName[tl.Sink].topic, "task_id", res.Task.ID, "bytes", tl.Size, "limit", tl.Limit}
	if m := res.Task.Msg; m != nil && m.Source == model.SourceKafka {
		attrs = append(attrs, "partition", m.Partition, "offset", m.Offset)
	}
	if tl.Err != nil {
		attrs = append(attrs, "error", tl.Err.Error())
	}
	ss.log.Warn("sink_record_too_large", attrs...)
}

// BreakerStates returns each sink's breaker state by name.
func (ss *Set) BreakerStates() map[string]State {
	out := make(map[string]State, len(ss.sinks))
	for _, s := range ss.sinks {
		out[s.name] = s.breaker.State()
	}
	return out
}

// Close flushes and closes every producer, all at once: a hung broker
// holds shutdown for closeFlushWait, not that long per sink.
func (ss *Set) Close() {
	ss.closed.Do(func() {
		ss.stop()
		var wg sync.WaitGroup
		for _, s := range ss.sinks {
			s.reportSlow(true)
			wg.Go(s.close)
		}
		if ss.dlq != nil {
			wg.Go(ss.dlq.Close)
		}
		wg.Wait()
	})
}

// closeFlushWait bounds the last flush at shutdown: what is left then are
// records a hung broker still holds, duplicates at worst if they land (a
// variable for this package's tests).
var closeFlushWait = 5 * time.Second

func flushClose(cl *kgo.Client) {
	ctx, cancel := context.WithTimeout(context.Background(), closeFlushWait)
	_ = cl.Flush(ctx)
	cancel()
	cl.Close()
}

// DLQEnabled reports whether a DLQ producer exists.
func (ss *Set) DLQEnabled() bool { return ss.dlq.cl != nil }
