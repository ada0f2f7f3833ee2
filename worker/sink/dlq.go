package sink

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"svc/worker/config"
	"svc/worker/model"

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
	// HeaderDLQTruncated is on a DLQ record whose value was cut to fit the
	// DLQ topic's max.message.bytes: the original value's size in bytes.
	HeaderDLQTruncated = "svc-dlq-truncated"
)

// DLQ sends failed messages to the dead-letter topic. Without a DLQ (no
// Kafka source and no dlq.topic) sends are dropped, warned once and counted.
type DLQ struct {
	outlet  // zero without a DLQ
	topic   string
	codec   string // dlq.compression
	worker  string
	stall   bool
	timeout time.Duration
	log     *slog.Logger
	m       *sinkMetrics
	warn    sync.Once
	events  *model.Events
}

func newDLQ(stop context.Context, cfg *config.Config, m *sinkMetrics, events *model.Events, log *slog.Logger) (*DLQ, error) {
	d := &DLQ{
		topic: cfg.DLQTopic(), codec: cfg.DLQ.Compression, worker: cfg.Worker.Name, stall: cfg.DLQ.OnSendFailure == "stall",
		timeout: cfg.DLQ.SendTimeout.D(), log: log, m: m, events: events,
	}
	if d.topic == "" {
		return d, nil
	}
	limit := newTopicLimit(stop, "dlq", d.topic, cfg.DLQ.MaxMessageBytes, 0, log)
	out, err := newOutlet(stop, cfg.DLQConn(), "svc-dlq", defaultLinger(cfg), d.timeout, cfg.DLQ.Compression, limit)
	if err != nil {
		return nil, fmt.Errorf("dlq: %w", err)
	}
	d.outlet = out
	return d, nil
}

// Send writes the failed task's original message to the DLQ, cut to fit
// its topic. It returns nil when the record is acknowledged, dropped by
// policy or no DLQ exists, and model.ErrDeliveryStalled when it failed
// under the stall policy.
func (d *DLQ) Send(ctx context.Context, res *model.TaskResult) error {
	reason := dlqReason(res)
	note := func(outcome string) { d.events.DeadLettered(res, outcome, reason, nil) }
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
	at, cut, err := d.write(sctx, res)
	if err == nil {
		d.sent(res, at, cut)
		return nil
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	d.m.dlq.WithLabelValues("failed").Inc()
	attrs := append([]any{"task_id", res.Task.ID, "error", err.Error()}, msgAttrs(res)...)
	if d.stall {
		note("failed_stall")
		d.log.Error("dlq_send_failed_stall", attrs...)
		return model.ErrDeliveryStalled
	}
	note("failed_drop")
	d.log.Error("dlq_send_failed_drop", attrs...)
	return nil
}

// sent counts and records res's DLQ record, acknowledged at at (Send) or
// committed (Stage), and logs a cut.
func (d *DLQ) sent(res *model.TaskResult, at model.DLQRecordAt, cut *dlqCut) {
	d.m.dlq.WithLabelValues("sent").Inc()
	d.events.DeadLettered(res, "sent", dlqReason(res), &at)
	if cut == nil {
		return
	}
	d.m.truncated.Inc()
	attrs := append([]any{"task_id", res.Task.ID, "value_bytes", cut.orig, "kept_bytes", cut.kept, "limit", d.limit.get()}, msgAttrs(res)...)
	if cut.refused != nil {
		attrs = append(attrs, "error", cut.refused.Error())
	}
	d.log.Warn("dlq_record_truncated", attrs...)
}

// msgAttrs are the partition and offset of res's message, for logs.
func msgAttrs(res *model.TaskResult) []any {
	if m := res.Task.Msg; m != nil {
		return []any{"partition", m.Partition, "offset", m.Offset}
	}
	return nil
}

// dlqCut describes a DLQ record cut to fit: the original value's size,
// the bytes kept, and the refusal that made a second, bare try necessary.
type dlqCut struct {
	orig, kept int
	refused    error
}

// write produces res's DLQ record, cut to the DLQ topic's limit. A
// refused record (a broker refuses a whole batch) is cut again to the
// limit the brokers tell now and sent alone; refused even then, once more
// with its value, key and original headers dropped. at is where the
// record landed; cut is nil when nothing was cut.
func (d *DLQ) write(ctx context.Context, res *model.TaskResult) (at model.DLQRecordAt, cut *dlqCut, err error) {
	rec, cut, err := d.build(ctx, res)
	if err != nil {
		return at, nil, fmt.Errorf("no answer about the DLQ topic's max.message.bytes within dlq.send_timeout %s: %w", d.timeout, err)
	}
	sent := time.Now()
	err = d.produce(ctx, rec, d.produceOn)
	if isTooLarge(err) {
		refused := err
		var limit int
		if limit, err = d.limit.fresh(ctx, sent); err != nil {
			return at, cut, fmt.Errorf("refused as too large (%w), and no answer about the DLQ topic's max.message.bytes within dlq.send_timeout %s: %w", refused, d.timeout, err)
		}
		rec = d.record(res)
		if orig := fit(rec, originalHeaders(res), limit); orig >= 0 {
			cut = &dlqCut{orig: orig, kept: len(rec.Value), refused: refused}
		}
		err = d.produceAlone(ctx, rec)
	}
	if isTooLarge(err) {
		d.limit.lower(RecordSize(rec) - 1)
		rec = d.record(res)
		orig := fit(rec, originalHeaders(res), 0)
		cut = &dlqCut{orig: orig, kept: len(rec.Value), refused: err}
		err = d.produceAlone(ctx, rec)
	}
	if err == nil {
		at = model.DLQRecordAt{Partition: rec.Partition, Offset: rec.Offset}
	}
	return at, cut, err
}

// build makes res's DLQ record, cut to the DLQ topic's limit, for Send
// and Stage alike. err is ctx's, when it ended first.
func (d *DLQ) build(ctx context.Context, res *model.TaskResult) (*kgo.Record, *dlqCut, error) {
	if err := d.limit.wait(ctx); err != nil {
		return nil, nil, err
	}
	rec := d.record(res)
	_, limit, err := d.limit.overLimit(ctx, RecordSize(rec))
	if err != nil {
		return nil, nil, err
	}
	var cut *dlqCut
	if orig := fit(rec, originalHeaders(res), limit); orig >= 0 {
		cut = &dlqCut{orig: orig, kept: len(rec.Value)}
	}
	return rec, cut, nil
}

// dlqReason is res's svc-dlq-reason: its error, else its status.
func dlqReason(res *model.TaskResult) string {
	if res.Err != nil {
		return res.Err.Error()
	}
	return res.Status
}

// produceAlone sends rec in a batch of its own.
func (d *DLQ) produceAlone(ctx context.Context, rec *kgo.Record) error {
	err := d.alone.produce(ctx, rec, d.produceOn)
	if err != nil && err == ctx.Err() { // the record before it held the producer
		return fmt.Errorf("no acknowledgement within dlq.send_timeout %s: %w", d.timeout, err)
	}
	return err
}

func (d *DLQ) produceOn(ctx context.Context, cl *kgo.Client, rec *kgo.Record) error {
	done := make(chan error, 1)
	cl.Produce(ctx, rec, func(_ *kgo.Record, err error) { done <- err })
	select {
	case err := <-done:
		return err
	case <-ctx.Done(): // the record may still land later, a duplicate at worst
		return fmt.Errorf("no acknowledgement within dlq.send_timeout %s: %w", d.timeout, ctx.Err())
	}
}

// originalHeaders is how many headers at the front of res's DLQ record are
// the message's own.
func originalHeaders(res *model.TaskResult) int {
	if m := res.Task.Msg; m != nil {
		return len(m.Headers)
	}
	return 0
}

// maxReasonBytes bounds svc-dlq-reason on a record cut to nothing.
const maxReasonBytes = 1024

// fit cuts rec, a DLQ record whose first nOrig headers are the message's
// own, to limit and returns the original value's size, or -1 when it
// fits: the value is cut (svc-dlq-truncated added), then if need be the
// message's own headers, the key and svc-dlq-reason beyond
// maxReasonBytes are dropped. limit 0 does all of it.
func fit(rec *kgo.Record, nOrig, limit int) int {
	if RecordSize(rec) <= limit {
		return -1
	}
	orig := rec.Value
	rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: HeaderDLQTruncated, Value: []byte(strconv.Itoa(len(orig)))})
	rec.Value = nil
	if RecordSize(rec) > limit {
		rec.Headers = rec.Headers[nOrig:]
	}
	if RecordSize(rec) > limit {
		rec.Key = nil
	}
	if RecordSize(rec) > limit {
		for i, h := range rec.Headers {
			if h.Key == HeaderDLQReason && len(h.Value) > maxReasonBytes {
				rec.Headers[i].Value = h.Value[:maxReasonBytes]
			}
		}
	}
	keep := min(len(orig), max(0, limit-RecordSize(rec)))
	for keep > 0 && recordSize(len(rec.Key), keep, rec.Headers) > limit {
		keep-- // the value's length prefix grew
	}
	rec.Value = orig[:keep]
	return len(orig)
}

func (d *DLQ) record(res *model.TaskResult) *kgo.Record {
	rec := &kgo.Record{Topic: d.topic}
	reason := dlqReason(res)
	var partition, offset string
	if m := res.Task.Msg; m != nil {
		rec.Key, rec.Value = m.Key, m.Value
		for _, h := range m.Headers {
			rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
		}
		if m.Source == model.SourceKafka {
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

// Close flushes and closes the producers, both at once.
func (d *DLQ) Close() {
	if d.cl != nil {
		d.close()
	}
}
