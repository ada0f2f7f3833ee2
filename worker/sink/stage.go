package sink

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"svc/worker/model"
)

// Staged is one task result's records for a Kafka transaction
// (sources.kafka.delivery = "exactly_once"): Stage builds them with
// Deliver's routing, size checks and DLQ cuts, the Kafka source produces
// them with their offsets in its own transaction, and reports Committed
// (only then are they counted and recorded) or Failed.
type Staged struct {
	// Records are produced in order; Bytes is their values' size.
	Records []*kgo.Record
	Bytes   int64
	to      []*kafkaSink // the sink of each record; nil for the DLQ record
	res     *model.TaskResult
	dlq     *model.TaskResult // the result the DLQ record stands for, if any
	cut     *dlqCut
	large   []*TooLargeError // sinks the result was too large for
}

// Stage builds res's records for a transaction, waiting only for the first
// lookup of a topic's limit; it fails when no DLQ exists for a failed
// result (exactly-once always has one: the source's <topic>_dlq).
func (ss *Set) Stage(ctx context.Context, res *model.TaskResult) (*Staged, error) {
	st := &Staged{res: res}
	if res.Status != model.StatusOK {
		return st, ss.stageDLQ(ctx, st, res)
	}
	targets, _ := ss.targets(res, false)
	recs, large, err := ss.records(ctx, res, targets, nil)
	if err != nil {
		return nil, err
	}
	for _, r := range recs {
		st.add(r.rec, r.s)
	}
	if st.large = large; len(large) == 0 {
		return st, nil
	}
	return st, ss.stageDLQ(ctx, st, tooLargeFailure(res, large))
}

func (st *Staged) add(rec *kgo.Record, s *kafkaSink) {
	st.Records = append(st.Records, rec)
	st.to = append(st.to, s)
	st.Bytes += int64(len(rec.Value))
}

// stageDLQ adds res's DLQ record, cut to the DLQ topic's limit.
func (ss *Set) stageDLQ(ctx context.Context, st *Staged, res *model.TaskResult) error {
	if ss.dlq.cl == nil {
		return errors.New("no DLQ: exactly-once needs one (dlq.topic or the source's <topic>_dlq)")
	}
	rec, cut, err := ss.dlq.build(ctx, res)
	if err != nil {
		return err
	}
	st.cut, st.dlq = cut, res
	st.add(rec, nil)
	return nil
}

// TargetCount is how many sinks an ok result goes to (unknown names not
// counted, and not logged: Deliver logs them).
func (ss *Set) TargetCount(res *model.TaskResult) int {
	names := res.Task.Sinks
	if names == nil {
		return len(ss.sinks)
	}
	n := 0
	for _, name := range names {
		if ss.byName[name] != nil {
			n++
		}
	}
	return n
}

// targets are the sinks an ok result goes to: every sink, or the task's
// named ones. Unknown names are skipped and counted, and logged unless
// quiet (a caller that may hand the result to Deliver looks quietly, so
// a task's unknown sink is logged once).
func (ss *Set) targets(res *model.TaskResult, quiet bool) (out []*kafkaSink, unknown int) {
	names := res.Task.Sinks
	if names == nil {
		return ss.sinks, 0
	}
	out = make([]*kafkaSink, 0, len(names))
	for _, n := range names {
		if s, ok := ss.byName[n]; ok {
			out = append(out, s)
			continue
		}
		unknown++
		if !quiet {
			ss.log.Error("sink_unknown", "sink", n, "task_id", res.Task.ID)
		}
	}
	return out, unknown
}

// Committed accounts for records that committed in a transaction: sink
// deliveries and DLQ sends are counted and recorded as Deliver does.
func (ss *Set) Committed(st *Staged) {
	for i, rec := range st.Records {
		s := st.to[i]
		if s == nil {
			ss.dlq.sent(st.dlq, model.DLQRecordAt{Partition: rec.Partition, Offset: rec.Offset}, st.cut)
			continue
		}
		s.delivered.Inc()
		ss.events.Delivered(st.res, s.name)
	}
	for _, tl := range st.large {
		ss.tooLarge(st.res, tl)
	}
}

// Failure is record I of St, which a transaction's producer could not
// deliver.
type Failure struct {
	St  *Staged
	I   int
	Err error
}

// Failed accounts for the records one transaction could not deliver: each
// sink with a failed record counts one breaker failure and logs once, the
// DLQ once. Records refused as too large are not counted (a broker refuses
// a whole batch, small ones included): the topic's limit is asked again
// (relimit) before the transaction aborts. renew reports that the
// transactional client's batch cap for a topic is stale (see producer).
func (ss *Set) Failed(fails []Failure) (renew bool) {
	var seen []*kafkaSink
	dlq := false
	refused := map[*topicLimit][]Failure{}
	var limits []*topicLimit                 // refused's keys in order
	perPartition := map[topicPartition]int{} // refused records, whatever their target
	for _, f := range fails {
		s := f.St.to[f.I]
		if isTooLarge(f.Err) {
			lim := ss.dlq.limit
			if s != nil {
				lim = s.limit
			}
			if refused[lim] == nil {
				limits = append(limits, lim)
			}
			refused[lim] = append(refused[lim], f)
			rec := f.St.Records[f.I]
			perPartition[topicPartition{rec.Topic, rec.Partition}]++
			continue
		}
		if s == nil {
			if !dlq {
				dlq = true
				ss.dlq.m.dlq.WithLabelValues("failed").Inc()
				ss.log.Error("dlq_send_failed_retry", "task_id", f.St.res.Task.ID, "records", len(fails), "error", f.Err.Error(),
					"detail", "exactly-once: the transaction aborts and its messages are processed again")
			}
			continue
		}
		if slices.Contains(seen, s) {
			continue
		}
		seen = append(seen, s)
		s.m.failures.WithLabelValues(s.name).Inc()
		s.breaker.Failure()
		s.log.Warn("sink_delivery_failed", "sink", s.name, "records", len(fails), "error", f.Err.Error(),
			"detail", "exactly-once: the transaction aborts and its messages are processed again")
	}
	for _, lim := range limits {
		renew = ss.relimit(lim, refused[lim], perPartition) || renew
	}
	return renew
}

type topicPartition struct {
	topic     string
	partition int32
}

// relimit sets lim after a transaction's records to its topic (fails)
// were refused as too large, and reports whether the transactional
// client's batch cap for the topic is stale. A cap other than the limit
// the brokers tell now explains the refusal. Otherwise a record that was
// its partition's only refused one (perPartition counts them, all targets
// together) travelled alone and the limit goes below it; else the limit
// is halved, to half the refused bytes of a partition at most.
// Exactly-once cannot try a record alone (it would be visible outside the
// transaction), so a record between the halved limit and the topic's real
// one goes to the DLQ.
func (ss *Set) relimit(lim *topicLimit, fails []Failure, perPartition map[topicPartition]int) (renew bool) {
	before := lim.get()
	n, err := lim.fresh(ss.stopCtx, time.Now())
	if err != nil {
		return false // the set closes
	}
	if cp := int(lim.txnCap.Load()); cp != 0 && cp != n {
		return true
	}
	type part struct{ bytes, size int }
	parts := map[int32]*part{}
	for _, f := range fails {
		rec := f.St.Records[f.I]
		p := parts[rec.Partition]
		if p == nil {
			p = &part{}
			parts[rec.Partition] = p
		}
		p.size = RecordSize(rec)
		p.bytes += p.size
	}
	alone := false
	for id, p := range parts {
		if perPartition[topicPartition{lim.topic, id}] == 1 {
			lim.lower(p.size - 1)
			alone = true
		}
	}
	if !alone && n >= before {
		half := n
		for _, p := range parts {
			half = min(half, min(n, p.bytes)/2)
		}
		lim.lower(half)
		lim.log.Warn("kafka_max_message_bytes", "target", lim.target, "topic", lim.topic, "max_message_bytes", lim.get(), "from", "refusal", "previous", n,
			"detail", "exactly-once: a broker refused a batch as too large and the brokers told no lower limit: the limit is halved; a result over it goes to the DLQ")
	}
	return lim.get() != int(lim.txnCap.Load())
}

// Aborted marks the tasks of sts, whose records will never commit, in
// the flight recorder (model.TransactionAbortedKind).
func (ss *Set) Aborted(sts []*Staged, reason string) {
	for _, st := range sts {
		ss.events.TransactionAborted(st.res, reason)
	}
}

// Acquire asks the breakers of the sinks in sts for one transaction
// without waiting: it returns false (and takes nothing) while one of them
// is open, so the transaction waits instead of committing offsets past
// undelivered results. A true answer is followed by Settle.
func (ss *Set) Acquire(sts []*Staged) bool {
	got := sinksOf(sts)
	for i, s := range got {
		if !s.breaker.TryAcquire() {
			for _, g := range got[:i] {
				g.breaker.Release()
			}
			return false
		}
	}
	return true
}

// Settle ends what Acquire took: committed records a success on each sink
// of sts; otherwise the sinks whose records failed have counted it
// (Failed), and the others are released.
func (ss *Set) Settle(sts []*Staged, committed bool) {
	for _, s := range sinksOf(sts) {
		if committed {
			s.breaker.Success()
		} else {
			s.breaker.Release()
		}
	}
}

// sinksOf is each sink of sts' records once (the DLQ's not).
func sinksOf(sts []*Staged) []*kafkaSink {
	var out []*kafkaSink
	for _, st := range sts {
		for _, s := range st.to {
			if s != nil && !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
	}
	return out
}

// TransactionOpts are the producer options of the exactly-once source's
// client: acks=all (transactions imply it), the sinks' one codec, each
// topic's batches capped at its limit.
func (ss *Set) TransactionOpts() []kgo.Opt {
	codec := ""
	if len(ss.sinks) > 0 {
		codec = ss.sinks[0].codec
	} else if ss.dlq != nil {
		codec = ss.dlq.codec
	}
	return []kgo.Opt{
		kgo.ProducerBatchCompression(compression(codec)...),
		kgo.ProducerBatchMaxBytesFn(func(topic string) int32 {
			for _, s := range ss.sinks {
				if s.topic == topic {
					return s.limit.capTxn()
				}
			}
			if ss.dlq != nil && ss.dlq.limit != nil && ss.dlq.topic == topic {
				return ss.dlq.limit.capTxn()
			}
			return DefaultMaxMessageBytes
		}),
	}
}
