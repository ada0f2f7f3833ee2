package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"svc/kafkaread/kconn"
	"svc/worker/config"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
)

// errDeliveryTimeout marks a produce that got no answer within the sink's
// delivery timeout; it counts as a breaker failure while the record stays
// with the producer, which keeps retrying it.
var errDeliveryTimeout = errors.New("no acknowledgement within the delivery timeout")

// Sink header names added to every result record.
const (
	HeaderTaskID          = "svc-task-id"
	HeaderSource          = "svc-source"
	HeaderSourcePartition = "svc-source-partition"
	HeaderSourceOffset    = "svc-source-offset"
	HeaderWorker          = "svc-worker"
)

// kafkaSink is one named sink: an idempotent acks=all producer behind its
// own circuit breaker.
type kafkaSink struct {
	name    string
	topic   string
	cl      *kgo.Client
	breaker *Breaker
	timeout time.Duration
	log     *slog.Logger
	m       *sinkMetrics
}

// sinkMetrics are the series of every sink, labelled by sink name.
type sinkMetrics struct {
	state       *prometheus.GaugeVec
	transitions *prometheus.CounterVec
	delivered   *prometheus.CounterVec
	failures    *prometheus.CounterVec
	dlq         *prometheus.CounterVec
}

func newSinkMetrics(reg prometheus.Registerer) *sinkMetrics {
	m := &sinkMetrics{
		state: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "svc_sink_breaker_state", Help: "Circuit breaker state per sink: 0 closed, 1 open, 2 half-open.",
		}, []string{"sink"}),
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "svc_sink_breaker_transitions_total", Help: "Circuit breaker transitions per sink, by target state.",
		}, []string{"sink", "to"}),
		delivered: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "svc_sink_delivered_total", Help: "Result records acknowledged by each sink.",
		}, []string{"sink"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "svc_sink_delivery_failures_total", Help: "Failed or unacknowledged delivery attempts per sink (each is retried).",
		}, []string{"sink"}),
		dlq: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "svc_dlq_records_total", Help: "DLQ outcomes: sent, failed (stall or drop follows), by outcome.",
		}, []string{"outcome"}),
	}
	reg.MustRegister(m.state, m.transitions, m.delivered, m.failures, m.dlq)
	return m
}

// newProducer builds an idempotent acks=all producer for conn. Defaults
// (client id, then the caller's) come first so that conn's client_config
// (client.id, linger.ms) overrides them. Linger defaults to 0: every
// delivery waits for its acknowledgement, so lingering only adds latency
// and caps throughput at max_in_flight records per linger period.
func newProducer(conn kconn.Conn, deliveryTimeout time.Duration, defaults ...kgo.Opt) (*kgo.Client, error) {
	connOpts, err := kconn.Opts(conn)
	if err != nil {
		return nil, err
	}
	opts := append([]kgo.Opt{kgo.ClientID("svc-sink"), kgo.ProducerLinger(0)}, defaults...)
	opts = append(opts, connOpts...)
	opts = append(opts,
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordDeliveryTimeout(max(deliveryTimeout, time.Second)), // kgo refuses less than 1 s; our own timers still apply the configured value
		kgo.ProducerBatchCompression(kgo.NoCompression()),
	)
	return kgo.NewClient(opts...)
}

// deliver produces rec until the sink acknowledges it or ctx ends. Nothing
// is dropped: failures are counted on the breaker and retried with backoff;
// while the breaker is open the call waits.
func (s *kafkaSink) deliver(ctx context.Context, build func() *kgo.Record) error {
	backoff := 100 * time.Millisecond
	for {
		if err := s.breaker.Acquire(ctx); err != nil {
			return err
		}
		err := s.produce(ctx, build())
		if err == nil {
			s.breaker.Success()
			s.m.delivered.WithLabelValues(s.name).Inc()
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		s.m.failures.WithLabelValues(s.name).Inc()
		s.breaker.Failure()
		s.log.Warn("sink_delivery_failed", "sink", s.name, "error", err.Error(), "retry_in", backoff.String())
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return ctx.Err()
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// produce sends one record and waits for its acknowledgement. A record
// unanswered after the delivery timeout counts one breaker failure and is
// waited for again: it stays with the producer, so it is not sent twice.
func (s *kafkaSink) produce(ctx context.Context, rec *kgo.Record) error {
	done := make(chan error, 1)
	s.cl.Produce(ctx, rec, func(_ *kgo.Record, err error) { done <- err })
	timer := time.NewTimer(s.timeout)
	defer timer.Stop()
	for {
		select {
		case err := <-done:
			return err
		case <-timer.C:
			s.m.failures.WithLabelValues(s.name).Inc()
			s.breaker.Failure()
			s.log.Warn("sink_delivery_slow", "sink", s.name, "error", errDeliveryTimeout.Error())
			timer.Reset(s.timeout)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// resultRecord builds a sink record for one task result.
func resultRecord(topic, worker string, res *TaskResult) *kgo.Record {
	rec := &kgo.Record{Topic: topic, Value: res.Output}
	t := res.Task
	hdr := []kgo.RecordHeader{{Key: HeaderTaskID, Value: []byte(t.ID)}, {Key: HeaderWorker, Value: []byte(worker)}}
	if m := t.Msg; m != nil {
		rec.Key = m.Key
		hdr = append(hdr, kgo.RecordHeader{Key: HeaderSource, Value: []byte(m.Source)})
		if m.Source == SourceKafka {
			hdr = append(hdr,
				kgo.RecordHeader{Key: HeaderSourcePartition, Value: []byte(strconv.Itoa(int(m.Partition)))},
				kgo.RecordHeader{Key: HeaderSourceOffset, Value: []byte(strconv.FormatInt(m.Offset, 10))})
		}
	}
	for k, v := range res.Labels {
		hdr = append(hdr, kgo.RecordHeader{Key: LabelHeaderPrefix + k, Value: []byte(v)})
	}
	rec.Headers = hdr
	return rec
}

// SinkSet delivers results to the named sinks and failures to the DLQ. It
// implements Deliverer.
type SinkSet struct {
	worker string
	sinks  []*kafkaSink
	byName map[string]*kafkaSink
	dlq    *DLQ
	log    *slog.Logger
	m      *sinkMetrics
	rec    *recording
	closed sync.Once
}

// NewSinkSet builds a producer and a breaker per [[sinks.kafka]] entry and
// the DLQ producer when a DLQ exists (spec 1.2 rule 3). It connects lazily:
// no broker is contacted until the first delivery.
func NewSinkSet(cfg *config.Config, reg prometheus.Registerer, unconfigured prometheus.Counter, log *slog.Logger) (*SinkSet, error) {
	ss := &SinkSet{worker: cfg.Worker.Name, byName: map[string]*kafkaSink{}, log: log, m: newSinkMetrics(reg)}
	for i, sc := range cfg.Sinks.Kafka {
		timeout := sc.DeliveryTimeout.D()
		cl, err := newProducer(cfg.SinkConn(i), 2*timeout)
		if err != nil {
			ss.Close()
			return nil, fmt.Errorf("sink %q: %w", sc.Name, err)
		}
		name := sc.Name
		s := &kafkaSink{name: name, topic: sc.Topic, cl: cl, timeout: timeout, log: log, m: ss.m}
		s.breaker = NewBreaker(sc.Breaker.FailureThreshold, sc.Breaker.OpenTimeout.D(), func(from, to int) {
			ss.m.state.WithLabelValues(name).Set(float64(to))
			ss.m.transitions.WithLabelValues(name, BreakerStateName(to)).Inc()
			log.Warn("sink_breaker_"+BreakerStateName(to), "sink", name, "from", BreakerStateName(from))
			if ss.rec != nil {
				ss.rec.state("sink_breaker_"+BreakerStateName(to), map[string]any{"sink": name, "from": BreakerStateName(from)})
			}
		})
		ss.m.state.WithLabelValues(name).Set(BreakerClosed)
		ss.sinks = append(ss.sinks, s)
		ss.byName[name] = s
	}
	dlq, err := newDLQ(cfg, ss.m, unconfigured, log)
	if err != nil {
		ss.Close()
		return nil, err
	}
	ss.dlq = dlq
	return ss, nil
}

// Deliver sends an ok result to its sinks (every sink, or the task's named
// ones) and a failed one to the DLQ. It returns nil once the result is
// safely out, ErrDLQStall when the DLQ send failed under
// dlq.on_send_failure = "stall", or ctx.Err().
func (ss *SinkSet) Deliver(ctx context.Context, res *TaskResult) error {
	if res.Status != StatusOK {
		return ss.dlq.Send(ctx, res)
	}
	targets := ss.sinks
	if names := res.Task.Sinks; names != nil {
		targets = targets[:0:0]
		for _, n := range names {
			if s, ok := ss.byName[n]; ok {
				targets = append(targets, s)
			} else {
				ss.log.Error("sink_unknown", "sink", n, "task_id", res.Task.ID)
			}
		}
	}
	one := func(s *kafkaSink) error {
		err := s.deliver(ctx, func() *kgo.Record { return resultRecord(s.topic, ss.worker, res) })
		if err == nil && ss.rec != nil {
			ss.rec.delivered(res, s.name)
		}
		return err
	}
	if len(targets) == 1 {
		return one(targets[0])
	}
	errs := make(chan error, len(targets))
	for _, s := range targets {
		go func() { errs <- one(s) }()
	}
	var first error
	for range targets {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// BreakerStates returns each sink's breaker state by name.
func (ss *SinkSet) BreakerStates() map[string]int {
	out := make(map[string]int, len(ss.sinks))
	for _, s := range ss.sinks {
		out[s.name] = s.breaker.State()
	}
	return out
}

// AnyOpen reports whether a sink's breaker is not closed.
func (ss *SinkSet) AnyOpen() bool {
	for _, s := range ss.sinks {
		if s.breaker.State() != BreakerClosed {
			return true
		}
	}
	return false
}

// Close flushes and closes every producer.
func (ss *SinkSet) Close() {
	ss.closed.Do(func() {
		for _, s := range ss.sinks {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_ = s.cl.Flush(ctx)
			cancel()
			s.cl.Close()
		}
		if ss.dlq != nil {
			ss.dlq.Close()
		}
	})
}
