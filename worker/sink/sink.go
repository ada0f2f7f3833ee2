package sink

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"svc/worker/config"
	"svc/worker/model"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
)

// errDeliveryTimeout marks a produce unanswered within the delivery
// timeout: a breaker failure, while the producer keeps the record.
var errDeliveryTimeout = errors.New("no acknowledgement within the delivery timeout")

// Sink header names added to every result record.
const (
	HeaderTaskID          = "svc-task-id"
	HeaderSource          = "svc-source"
	HeaderSourcePartition = "svc-source-partition"
	HeaderSourceOffset    = "svc-source-offset"
	HeaderWorker          = "svc-worker"
)

// TooLargeError is a result record its sink's topic does not take: a
// failure of that one message (it goes to the DLQ), not of the sink.
type TooLargeError struct {
	Sink  string
	Size  int   // RecordSize of the result record
	Limit int   // the topic's max.message.bytes as the sink knows it
	Err   error // the producer's or the broker's refusal; nil when known before producing
}

func (e *TooLargeError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("result too large for sink %s: %d bytes refused (limit %d): %v", e.Sink, e.Size, e.Limit, e.Err)
	}
	return fmt.Sprintf("result too large for sink %s: %d bytes > limit %d", e.Sink, e.Size, e.Limit)
}

func (e *TooLargeError) Unwrap() error { return e.Err }

// kafkaSink is one named sink, behind its own circuit breaker.
type kafkaSink struct {
	name    string
	codec   string // sinks.kafka[].compression
	forward bool   // sinks.kafka[].forward_headers
	topic   string
	outlet
	breaker   *Breaker
	timeout   time.Duration
	log       *slog.Logger
	m         *sinkMetrics
	delivered prometheus.Counter // m.delivered's child of this sink
	slow      slowLog
}

// slowLog bounds sink_delivery_slow to one line per delivery_timeout per
// sink (during an outage every pending delivery goes slow once per
// delivery_timeout); one held back is counted in the next line, at the
// latest when its window ends (or the sinks close).
type slowLog struct {
	mu    sync.Mutex
	last  time.Time   // when the last line was logged
	n     int         // slow deliveries not reported yet
	timer *time.Timer // reports n when the window ends; nil: none set
}

// slowDelivery counts a delivery unacknowledged past delivery_timeout as
// a breaker failure and logs it (slowLog).
func (s *kafkaSink) slowDelivery() {
	s.m.failures.WithLabelValues(s.name).Inc()
	s.breaker.Failure()
	s.slow.mu.Lock()
	s.slow.n++
	s.slow.mu.Unlock()
	s.reportSlow(false)
}

// reportSlow logs the slow deliveries held back, in one line: at once when
// now (the sinks close), else once a delivery_timeout has passed since the
// last line (a timer waits for it).
func (s *kafkaSink) reportSlow(now bool) {
	s.slow.mu.Lock()
	if s.slow.timer != nil {
		s.slow.timer.Stop() // none when it is the timer calling
		s.slow.timer = nil
	}
	n := s.slow.n
	if n > 0 {
		if wait := time.Until(s.slow.last.Add(s.timeout)); !now && wait > 0 {
			s.slow.timer = time.AfterFunc(wait, func() { s.reportSlow(false) })
			s.slow.mu.Unlock()
			return
		}
		s.slow.last, s.slow.n = time.Now(), 0
	}
	s.slow.mu.Unlock()
	if n > 0 {
		s.logSlow(n)
	}
}

func (s *kafkaSink) logSlow(n int) {
	s.log.Warn("sink_delivery_slow", "sink", s.name, "error", errDeliveryTimeout.Error(), "deliveries", n,
		"detail", "deliveries unacknowledged past delivery_timeout since the previous sink_delivery_slow line; each counts a breaker failure and is still waited for")
}

// defaultLinger is a producer's linger unless client_config sets linger.ms:
// 5 ms with the Kafka source, whose deliveries overlap by the hundred (at
// linger 0 produce requests cost the worker and the brokers more than the
// records); none on an HTTP-only worker, where a linger would be added to
// every response.
func defaultLinger(cfg *config.Config) time.Duration {
	if cfg.Sources.Kafka.Enabled {
		return 5 * time.Millisecond
	}
	return 0
}

// compression is the codec preference for a compression key: the codec,
// then none for a broker too old to take it (zstd needs Kafka 2.1).
func compression(codec string) []kgo.CompressionCodec {
	var c kgo.CompressionCodec
	switch codec {
	case "gzip":
		c = kgo.GzipCompression()
	case "snappy":
		c = kgo.SnappyCompression()
	case "lz4":
		c = kgo.Lz4Compression()
	case "zstd":
		c = kgo.ZstdCompression()
	default: // "none"; the config allows nothing else
		return []kgo.CompressionCodec{kgo.NoCompression()}
	}
	return []kgo.CompressionCodec{c, kgo.NoCompression()}
}

// deliver produces rec, of size within the topic's limit (Set.records),
// until the sink acknowledges it or ctx ends; build makes it again for a
// retry. Failures count on the breaker and are retried with backoff; while
// the breaker is open the call waits. A broker refuses a whole batch as
// too large, small records included, so a refused record is judged again
// (refused: the refusal so far, if any); only a refusal of the record
// alone makes it a *TooLargeError, and lowers the limit below it.
func (s *kafkaSink) deliver(ctx context.Context, rec *kgo.Record, size int, build func() *kgo.Record, refused *refusal) error {
	var (
		alone, retry bool
		limit        int
		err          error
	)
	if refused != nil {
		if retry, alone, limit, err = s.judge(ctx, size, refused); !retry {
			return err
		}
	}
	backoff := 100 * time.Millisecond
	for {
		if err := s.breaker.Acquire(ctx); err != nil {
			return err
		}
		if rec == nil { // a retry: the producer owned the last one
			rec = build()
		}
		at, capped := time.Now(), s.limit.get()
		if alone {
			err = s.alone.produce(ctx, rec, s.produceOn)
		} else {
			err = s.produce(ctx, rec, s.produceOn)
		}
		rec = nil
		if err == nil {
			s.breaker.Success()
			s.delivered.Inc()
			return nil
		}
		if ctx.Err() != nil {
			s.breaker.Release()
			return ctx.Err()
		}
		if isTooLarge(err) {
			s.breaker.Release()
			if alone {
				s.limit.lower(size - 1)
				return &TooLargeError{Sink: s.name, Size: size, Limit: limit, Err: err}
			}
			r := &refusal{at: at, limit: capped, err: err, again: refused != nil}
			if retry, alone, limit, err = s.judge(ctx, size, r); !retry {
				return err
			}
			refused = r
			continue
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

// refusal is a broker's refusal of a record as too large: the error,
// when the record was produced and the limit its batch was capped at.
type refusal struct {
	at    time.Time
	limit int
	err   error
	again bool // the record was refused once more after the first refusal
}

// judge decides about a record of size that a broker refused (r) by the
// topic's limit as looked up since: over it, a *TooLargeError; within it,
// produced again, batched when the lookup lowered the limit below its
// batch's cap (the producers were renewed) on a first refusal, else alone.
// err is otherwise ctx's.
func (s *kafkaSink) judge(ctx context.Context, size int, r *refusal) (retry, alone bool, limit int, err error) {
	limit, err = s.limit.fresh(ctx, r.at)
	if err != nil {
		return false, false, limit, err
	}
	if size > limit {
		return false, false, limit, &TooLargeError{Sink: s.name, Size: size, Limit: limit, Err: r.err}
	}
	if limit < r.limit && !r.again {
		return true, false, limit, nil
	}
	s.m.refusedRetries.WithLabelValues(s.name).Inc()
	return true, true, limit, nil
}

// produceOn produces rec on cl and waits for its acknowledgement. A
// record unanswered after the delivery timeout counts one breaker failure
// and is waited for again: it stays with the producer, so it is not sent
// twice.
func (s *kafkaSink) produceOn(ctx context.Context, cl *kgo.Client, rec *kgo.Record) error {
	w := produceWaits.Get().(*produceWait)
	cl.Produce(ctx, rec, w.ack)
	if w.timer == nil {
		w.timer = time.NewTimer(s.timeout)
	} else {
		w.timer.Reset(s.timeout)
	}
	for {
		select {
		case err := <-w.done:
			w.timer.Stop()
			produceWaits.Put(w) // acknowledged: nothing uses w any more
			return err
		case <-w.timer.C:
			s.slowDelivery()
			w.timer.Reset(s.timeout)
		case <-ctx.Done():
			// The producer still holds rec and calls w.ack later: w is
			// left to the collector, never reused.
			w.timer.Stop()
			return ctx.Err()
		}
	}
}

// produceWait is what one produce waits with, pooled so a delivery
// allocates none of it (BenchmarkDeliver); one goes back to the pool only
// once its acknowledgement was received.
type produceWait struct {
	done  chan error
	ack   func(*kgo.Record, error)
	timer *time.Timer // nil until first used
}

var produceWaits = sync.Pool{New: func() any {
	w := &produceWait{done: make(chan error, 1)}
	w.ack = func(_ *kgo.Record, err error) { w.done <- err }
	return w
}}

// resultRecord builds a sink record for one task result: the output as
// value, the message key, svc-* and svc-label-* headers, and with forward
// the input message's own headers first (its svc-* ones excepted).
func resultRecord(topic, workerName string, forward bool, res *model.TaskResult) *kgo.Record {
	// The record and its svc- headers in one allocation, every header
	// value in a second (BenchmarkDeliver).
	rb := &resultRecordBuf{}
	rec := &rb.rec
	rec.Topic, rec.Value = topic, res.Output
	t, m := res.Task, res.Task.Msg
	var own []model.Header // the message's headers to forward
	size := len(t.ID) + len(workerName) + 2*20
	if m != nil {
		size += len(m.Source)
		if forward {
			own = m.Headers
		}
	}
	for _, v := range res.Labels {
		size += len(v)
	}
	h := headerBuf{hdr: rb.hdr[:0], buf: make([]byte, 0, size)}
	if n := len(res.Labels) + 5; len(own) > 0 || n > len(rb.hdr) {
		h.hdr = make([]kgo.RecordHeader, 0, n+len(own))
	}
	for _, o := range own {
		if !strings.HasPrefix(o.Key, "svc-") {
			h.hdr = append(h.hdr, kgo.RecordHeader{Key: o.Key, Value: o.Value})
		}
	}
	h.buf = append(h.buf, t.ID...)
	h.put(HeaderTaskID)
	h.buf = append(h.buf, workerName...)
	h.put(HeaderWorker)
	if m != nil {
		rec.Key = m.Key
		h.buf = append(h.buf, m.Source...)
		h.put(HeaderSource)
		if m.Source == model.SourceKafka {
			h.buf = strconv.AppendInt(h.buf, int64(m.Partition), 10)
			h.put(HeaderSourcePartition)
			h.buf = strconv.AppendInt(h.buf, m.Offset, 10)
			h.put(HeaderSourceOffset)
		}
	}
	for k, v := range res.Labels {
		h.buf = append(h.buf, v...)
		h.put(model.LabelHeaderPrefix + k)
	}
	rec.Headers = h.hdr
	return rec
}

// headerBuf builds headers whose values share one buffer.
type headerBuf struct {
	hdr []kgo.RecordHeader
	buf []byte
	at  int // where the next value starts in buf
}

// put adds header key, its value the bytes appended to buf since the last.
func (h *headerBuf) put(key string) {
	h.hdr = append(h.hdr, kgo.RecordHeader{Key: key, Value: h.buf[h.at:len(h.buf):len(h.buf)]})
	h.at = len(h.buf)
}

// resultRecordBuf is a result record with room for its five svc- headers.
type resultRecordBuf struct {
	rec kgo.Record
	hdr [5]kgo.RecordHeader
}
