package sink

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"svc/worker"
	"svc/worker/config"

	"github.com/twmb/franz-go/pkg/kgo"
)

// DLQ record headers, added to the original record's own.
const (
	HeaderDLQReason          = "svc-dlq-reason"
	HeaderDLQAttempts        = "svc-dlq-attempts"
	HeaderDLQSourcePartition = "svc-dlq-source-partition"
	HeaderDLQSourceOffset    = "svc-dlq-source-offset"
	HeaderDLQWorker          = "svc-dlq-worker"
	HeaderDLQTS              = "svc-dlq-ts"
)

// DLQ sends failed messages to the dead-letter topic. Without a DLQ (no
// Kafka source and no dlq.topic) sends are dropped, warned once and counted.
type DLQ struct {
	cl      *kgo.Client // nil: no DLQ configured
	topic   string
	worker  string
	stall   bool
	timeout time.Duration
	log     *slog.Logger
	m       *sinkMetrics
	warn    sync.Once
	events  *worker.Events
}

func newDLQ(cfg *config.Config, m *sinkMetrics, events *worker.Events, log *slog.Logger) (*DLQ, error) {
	d := &DLQ{
		topic: cfg.DLQTopic(), worker: cfg.Worker.Name, stall: cfg.DLQ.OnSendFailure == "stall",
		timeout: cfg.DLQ.SendTimeout.D(), log: log, m: m, events: events,
	}
	if d.topic == "" {
		return d, nil
	}
	cl, err := newProducer(cfg.DLQConn(), d.timeout, cfg.DLQ.Compression, kgo.ClientID("svc-dlq"))
	if err != nil {
		return nil, fmt.Errorf("dlq: %w", err)
	}
	d.cl = cl
	return d, nil
}

// Enabled reports whether a DLQ topic exists.
func (d *DLQ) Enabled() bool { return d.cl != nil }

// Send writes the failed task's original message to the DLQ. It returns nil
// when the record is acknowledged, dropped by policy or no DLQ exists, and
// worker.ErrDeliveryStalled when it failed under the stall policy.
func (d *DLQ) Send(ctx context.Context, res *worker.TaskResult) error {
	reason := res.Status
	if res.Err != nil {
		reason = res.Err.Error()
	}
	note := func(outcome string) { d.events.DeadLettered(res, outcome, reason) }
	if d.cl == nil {
		note("dropped_unconfigured")
		d.m.dropped.Inc()
		d.warn.Do(func() {
			d.log.Warn("dlq_unconfigured_drop", "detail", "a failed message was dropped: no DLQ exists (set dlq.topic); further drops are only counted in svc_dlq_unconfigured_drops_total")
		})
		return nil
	}
	sctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	done := make(chan error, 1)
	d.cl.Produce(sctx, d.record(res), func(_ *kgo.Record, err error) { done <- err })
	var err error
	select {
	case err = <-done:
	case <-sctx.Done():
		// A record already sent is not failed by its context (the
		// idempotent producer keeps it until the broker answers, which a
		// hung broker never does): the send timed out all the same. The
		// record may still land later, a duplicate at worst.
		err = fmt.Errorf("no acknowledgement within dlq.send_timeout %s: %w", d.timeout, sctx.Err())
	}
	if err == nil {
		d.m.dlq.WithLabelValues("sent").Inc()
		note("sent")
		return nil
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	d.m.dlq.WithLabelValues("failed").Inc()
	attrs := []any{"task_id", res.Task.ID, "error", err.Error()}
	if m := res.Task.Msg; m != nil {
		attrs = append(attrs, "partition", m.Partition, "offset", m.Offset)
	}
	if d.stall {
		note("failed_stall")
		d.log.Error("dlq_send_failed_stall", attrs...)
		return worker.ErrDeliveryStalled
	}
	note("failed_drop")
	d.log.Error("dlq_send_failed_drop", attrs...)
	return nil
}

func (d *DLQ) record(res *worker.TaskResult) *kgo.Record {
	rec := &kgo.Record{Topic: d.topic}
	reason := res.Status
	if res.Err != nil {
		reason = res.Err.Error()
	}
	var partition, offset string
	if m := res.Task.Msg; m != nil {
		rec.Key, rec.Value = m.Key, m.Value
		for _, h := range m.Headers {
			rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
		}
		if m.Source == worker.SourceKafka {
			partition, offset = strconv.Itoa(int(m.Partition)), strconv.FormatInt(m.Offset, 10)
		}
	} else {
		rec.Value = res.Task.Input
	}
	rec.Headers = append(rec.Headers,
		kgo.RecordHeader{Key: HeaderTaskID, Value: []byte(res.Task.ID)},
		kgo.RecordHeader{Key: HeaderDLQReason, Value: []byte(reason)},
		kgo.RecordHeader{Key: HeaderDLQAttempts, Value: []byte(strconv.Itoa(res.Attempts))},
		kgo.RecordHeader{Key: HeaderDLQSourcePartition, Value: []byte(partition)},
		kgo.RecordHeader{Key: HeaderDLQSourceOffset, Value: []byte(offset)},
		kgo.RecordHeader{Key: HeaderDLQWorker, Value: []byte(d.worker)},
		kgo.RecordHeader{Key: HeaderDLQTS, Value: []byte(strconv.FormatInt(time.Now().UnixMilli(), 10))},
	)
	return rec
}

// Close flushes and closes the producer.
func (d *DLQ) Close() {
	if d.cl == nil {
		return
	}
	flushClose(d.cl)
}
