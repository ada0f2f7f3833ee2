package kafka

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"svc/worker/model"
	"svc/worker/sink"
)

// Exactly-once (sources.kafka.delivery = "exactly_once"; behaviour in
// docs/operations.md "Exactly-once"). The consumer is franz-go's
// GroupTransactSession: results are staged (sink.Set.Stage) and the message
// finishes at once; the poll loop closes a transaction every
// commit_interval, or sooner at txnMessages or txnBytes staged, producing
// the staged results below each partition's commit point in finishing
// order with the commit points themselves. Anything else aborts: the
// consumer rewinds to the committed offsets and all polled, running and
// staged work is forgotten (resetAll) and read again.

// transactions is the exactly-once committer. txnAt is when the last
// transaction closed; all fields but the atomics belong to the poll loop.
type transactions struct {
	*Source
	sinks          *sink.Set // builds the records and accounts for them
	sess           *kgo.GroupTransactSession
	txnAt          time.Time
	txnBegan       time.Time // when the last transaction began
	txnRetryAt     time.Time
	txnBackoff     time.Duration
	txnRenew       bool        // the sinks asked for a new session after the transaction aborts
	txnReset       atomic.Bool // a rebalance: abort and start over
	restart        atomic.Bool // the session failed: Run starts a new one
	restartedAt    time.Time
	restartBackoff time.Duration
	producer       atomic.Pointer[producerEpoch] // the last transaction's (supplanted)
}

// newClient builds the transactional client that consumes (read_committed),
// produces every result and commits offsets inside transactions.
func (s *transactions) newClient(opts []kgo.Opt) (*kgo.Client, error) {
	opts = append(opts, s.sinks.TransactionOpts()...)
	opts = append(opts,
		kgo.TransactionalID(s.wcfg.TransactionalID()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
	)
	sess, err := kgo.NewGroupTransactSession(opts...)
	if err != nil {
		return nil, err
	}
	s.sess = sess
	s.txnAt, s.txnRetryAt, s.txnBackoff = time.Now(), time.Time{}, 0
	return sess.Client(), nil
}

func (*transactions) background(context.Context) {}
func (*transactions) transactional() bool        { return true }
func (s *transactions) pollWait() time.Duration  { return s.txnWait() }
func (s *transactions) memberFenced(err error)   { s.fence(err) }

func (s *transactions) turn(ctx context.Context) bool {
	s.maybeTransact(ctx)
	return s.fenced.Load() == nil && !s.restart.Load()
}

func (s *transactions) again(ctx context.Context) bool {
	return s.restart.Load() && s.restartSession(ctx)
}

// last closes a last transaction with what finished, unless fenced.
func (s *transactions) last(ctx context.Context) {
	if s.fenced.Load() == nil {
		s.transact(ctx)
	}
}

// onRevoked: the session aborts on any revoke or loss; the poll loop
// rewinds and starts over (abortReset).
func (s *transactions) onRevoked(_ context.Context, ps []int32) { s.onLost(ps) }

func (s *transactions) onLost(ps []int32) {
	s.sinks.Aborted(s.forget(ps), "partition revoked or lost before its transaction")
	s.txnReset.Store(true)
	s.signalRoom()
}

// finished stages the results of j's message for the next transaction
// and finishes its offset. A message not run (notRun) or whose results
// could not be staged stays unfinished (read again); one whose partition
// left meanwhile has its results dropped.
func (s *transactions) finished(j job, taskCtx context.Context, results []model.TaskResult) []job {
	defer j.done()
	unfinished := false
	for i := range results {
		unfinished = unfinished || notRun(taskCtx, &results[i])
	}
	m := stagedMsg{offset: j.w.msg.Offset}
	for i := 0; i < len(results) && !unfinished; i++ {
		st, err := s.sinks.Stage(taskCtx, &results[i])
		if err != nil {
			if taskCtx.Err() == nil {
				s.log.Error("kafka_stage_failed", "task_id", results[i].Task.ID, "error", err.Error())
			}
			unfinished = true
			break
		}
		m.results = append(m.results, st)
		m.bytes += st.Bytes
	}
	s.mu.Lock()
	if p := j.w.part; !unfinished && !p.gone {
		p.outbox = append(p.outbox, m)
		s.staged++
		s.stagedBytes += m.bytes
	}
	s.doneLocked(j.w, unfinished, true)
	next := s.jobs(s.settleLocked(j.w.part))
	s.mu.Unlock()
	s.signalRoom() // a transaction may be due
	return next
}

// stagedMsg is a finished message's staged results, waiting in its
// partition's outbox for the transaction that commits its offset.
type stagedMsg struct {
	offset  int64
	results []*sink.Staged
	bytes   int64
}

// Transaction sizes: a transaction closes once half the staging cap is
// reached, so messages keep finishing into the next one while it commits.
func (l limits) txnMessages() int { return l.maxStaged / 2 }

const txnBytes = deliverBytes / 2

// txnRetryMax bounds the wait between failed transactions.
const txnRetryMax = 5 * time.Second

// txnDue reports whether a transaction should close now.
func (s *transactions) txnDue() bool {
	select {
	case <-s.commitNow: // a consume pause ended
		return true
	default:
	}
	s.mu.Lock()
	full := s.staged >= s.lim.txnMessages() || s.stagedBytes >= txnBytes
	s.mu.Unlock()
	return full || time.Since(s.txnAt) >= s.cfg.CommitInterval.D()
}

// txnWait is how long the poll loop may block before the next transaction
// is due.
func (s *transactions) txnWait() time.Duration {
	return max(time.Millisecond, min(time.Second, s.cfg.CommitInterval.D()-time.Since(s.txnAt), time.Until(s.txnRetryAt)+time.Millisecond))
}

// maybeTransact runs the reset a rebalance asked for, then a transaction
// when one is due. Only the poll loop calls it: the session must not poll,
// begin or end concurrently.
func (s *transactions) maybeTransact(ctx context.Context) {
	if s.txnReset.Swap(false) {
		s.abortReset(ctx, "rebalance")
	}
	if s.fenced.Load() != nil || !s.txnDue() || time.Now().Before(s.txnRetryAt) {
		return
	}
	if s.flow.commitsHeld() { // consume pause: nothing commits; staged work waits
		s.txnAt = time.Now()
		return
	}
	s.transact(ctx)
}

// transact closes one transaction: the staged results below each
// partition's commit point and the commit points themselves.
func (s *transactions) transact(ctx context.Context) {
	s.txnAt = time.Now()
	offsets := map[int32]kgo.EpochOffset{}
	parts := map[int32]*partState{}
	var batch []*sink.Staged
	s.mu.Lock()
	for id, p := range s.parts {
		eo, ok := p.committable()
		if !ok || p.stalled {
			continue
		}
		offsets[id], parts[id] = eo, p
		for _, m := range p.outbox {
			if m.offset < eo.Offset {
				batch = append(batch, m.results...)
			}
		}
	}
	s.mu.Unlock()
	if len(offsets) == 0 {
		return
	}
	if !s.sinks.Acquire(batch) {
		// A sink's breaker is open: nothing commits past its results.
		s.txnRetryAt = time.Now().Add(100 * time.Millisecond)
		return
	}
	start := time.Now()
	committed, err, produceErr := s.commitTxn(ctx, batch, offsets)
	s.sinks.Settle(batch, committed)
	s.m.txnDuration.Observe(time.Since(start).Seconds())
	switch {
	case committed:
		s.txnBackoff = 0
		s.m.txns.WithLabelValues("committed").Inc()
		s.committedTxn(parts, offsets)
		for _, st := range batch {
			s.sinks.Committed(st)
		}
	case isFenced(err):
		s.fence(err)
	default:
		s.m.txns.WithLabelValues("aborted").Inc()
		reason := "aborted by the group session (rebalance) or the broker"
		if err != nil {
			reason = err.Error()
		} else if produceErr != nil {
			reason = "a record was refused: " + produceErr.Error()
		}
		s.txnBackoff = min(max(2*s.txnBackoff, 100*time.Millisecond), txnRetryMax)
		s.txnRetryAt = time.Now().Add(s.txnBackoff)
		s.log.Warn("kafka_transaction_aborted", "records", countRecords(batch), "partitions", len(offsets), "reason", reason, "retry_in", s.txnBackoff.String(),
			"detail", "the staged results are discarded and their messages read again from the committed offsets")
		s.app.Events().State("kafka_transaction_aborted", map[string]any{"records": countRecords(batch), "partitions": len(offsets), "reason": reason})
		s.resetAll(reason)
		if errors.Is(err, errBrokenSession) || (err != nil && !isAbortable(err)) {
			s.failSession(ctx, err)
		} else if s.txnRenew {
			s.failSession(ctx, errLimitChanged)
		}
	}
}

// errLimitChanged restarts the session after a batch was refused as too
// large: franz-go reads a partition's batch cap once per client.
var errLimitChanged = errors.New("a sink's or the DLQ's max.message.bytes changed: the producer's batch caps are set when its session starts")

// errBrokenSession marks a transaction that could not begin.
var errBrokenSession = errors.New("transaction could not begin")

// commitTxn produces batch and commits offsets in one transaction. err
// is the session's (Begin, End); produceErr the first record refused,
// which aborts the transaction but leaves the session working.
func (s *transactions) commitTxn(ctx context.Context, batch []*sink.Staged, offsets map[int32]kgo.EpochOffset) (committed bool, err, produceErr error) {
	s.txnRenew = false
	s.txnBegan = time.Now()
	if err := s.sess.Begin(); err != nil {
		return false, fmt.Errorf("%w: %w", errBrokenSession, err), nil
	}
	fails := make(chan sink.Failure, countRecords(batch))
	for _, st := range batch {
		for i, rec := range st.Records {
			s.sess.Produce(ctx, rec, func(_ *kgo.Record, err error) {
				if err != nil {
					fails <- sink.Failure{St: st, I: i, Err: err}
				}
			})
		}
	}
	tctx, cancel := context.WithTimeout(ctx, txnTimeout)
	defer cancel()
	end := kgo.TryCommit
	if err := s.cl.Flush(tctx); err != nil {
		end = kgo.TryAbort
	}
	var failed []sink.Failure
	for len(fails) > 0 {
		failed = append(failed, <-fails)
	}
	if len(failed) > 0 {
		s.txnRenew = s.sinks.Failed(failed)
		produceErr = failed[0].Err
		end = kgo.TryAbort
	}
	// The session would commit every polled offset; the request is
	// rewritten to the commit points (see commitPoints).
	committed, err = s.sess.End(kgo.PreTxnCommitFnContext(tctx, s.commitPoints(offsets)), end)
	if err == nil {
		s.noteProducer(tctx)
	}
	if !committed {
		s.rewind(ctx)
	}
	return committed, err, produceErr
}

// commitPoints rewrites the transaction's offset commit to offsets, the
// commit points: franz-go's session would commit everything polled, and
// this source polls ahead of what is finished.
func (s *transactions) commitPoints(offsets map[int32]kgo.EpochOffset) func(*kmsg.TxnOffsetCommitRequest) error {
	return func(req *kmsg.TxnOffsetCommitRequest) error {
		s.producer.Store(&producerEpoch{req.ProducerID, req.ProducerEpoch})
		t := kmsg.NewTxnOffsetCommitRequestTopic()
		t.Topic = s.topic
		for _, rt := range req.Topics {
			if rt.Topic == s.topic {
				t.TopicID = rt.TopicID
			}
		}
		for p, eo := range offsets {
			rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset, rp.LeaderEpoch = p, eo.Offset, eo.Epoch
			rp.Metadata = &req.MemberID
			t.Partitions = append(t.Partitions, rp)
		}
		req.Topics = []kmsg.TxnOffsetCommitRequestTopic{t}
		return nil
	}
}

// rewind moves the consumer back to the group's committed offsets after
// an abort (the log start where none is committed): the session's own
// rewind would go to what was polled, not to the commit points.
func (s *transactions) rewind(ctx context.Context) {
	rctx, cancel := context.WithTimeout(ctx, txnTimeout)
	defer cancel()
	adm := kadm.NewClient(s.cl)
	committed, err := adm.FetchOffsets(rctx, s.cfg.Group)
	if err == nil {
		err = committed.Error()
	}
	starts, serr := adm.ListStartOffsets(rctx, s.topic)
	if err == nil && serr != nil {
		err = serr
	}
	if err != nil {
		s.failSession(ctx, fmt.Errorf("after an aborted transaction the committed offsets could not be read back: %w", err))
		return
	}
	to := map[int32]kgo.EpochOffset{}
	starts.Each(func(o kadm.ListedOffset) {
		if o.Topic == s.topic {
			to[o.Partition] = kgo.EpochOffset{Epoch: -1, Offset: o.Offset}
		}
	})
	committed.Each(func(o kadm.OffsetResponse) {
		if o.Topic == s.topic && o.At >= 0 {
			to[o.Partition] = kgo.EpochOffset{Epoch: -1, Offset: o.At}
		}
	})
	s.cl.SetOffsets(map[string]map[int32]kgo.EpochOffset{s.topic: to})
}

// txnTimeout bounds producing and ending one transaction.
const txnTimeout = 30 * time.Second

func countRecords(batch []*sink.Staged) int {
	n := 0
	for _, st := range batch {
		n += len(st.Records)
	}
	return n
}

// committedTxn moves the committed partitions' sent offsets and drops the
// committed messages from their outboxes.
func (s *transactions) committedTxn(parts map[int32]*partState, offsets map[int32]kgo.EpochOffset) {
	s.mu.Lock()
	for id, eo := range offsets {
		p := parts[id]
		if !p.gone {
			p.sent = eo.Offset
		}
		p.outbox = slices.DeleteFunc(p.outbox, func(m stagedMsg) bool {
			if m.offset < eo.Offset && !p.gone {
				s.staged--
				s.stagedBytes -= m.bytes
			}
			return m.offset < eo.Offset
		})
	}
	start := s.settleLocked()
	s.mu.Unlock()
	s.start(s.jobs(start))
	s.committed(offsets)
}

// abortReset aborts an empty transaction after a rebalance, rewinds every
// partition to its committed offset and forgets all polled work.
func (s *transactions) abortReset(ctx context.Context, why string) {
	err := s.sess.Begin()
	if err == nil {
		tctx, cancel := context.WithTimeout(ctx, txnTimeout)
		_, err = s.sess.End(tctx, kgo.TryAbort)
		cancel()
	}
	if err != nil && !isAbortable(err) {
		s.failSession(ctx, err)
		return
	}
	s.rewind(ctx)
	s.log.Info("kafka_transaction_reset", "reason", why, "detail", "partitions rewound to their committed offsets; work polled since is read again")
	s.resetAll(why)
}

// resetAll starts every owned partition afresh: its work is read again
// from the committed offset, messages still running finish against the
// old state, and the staged tasks are marked aborted with why.
func (s *transactions) resetAll(why string) {
	s.mu.Lock()
	ids := slices.Collect(maps.Keys(s.parts))
	dropped := s.forgetLocked(ids)
	for _, id := range ids {
		s.parts[id] = newPartState(id)
	}
	s.mu.Unlock()
	s.sinks.Aborted(dropped, why)
}

// fence stops consuming for good, committing nothing more: a newer
// producer holds the transactional id, or the producer failed beyond
// recovery.
func (s *transactions) fence(err error) {
	if !s.fenced.CompareAndSwap(nil, &err) {
		return
	}
	id := s.wcfg.TransactionalID()
	name, detail, why := "kafka_producer_fenced", fmt.Sprintf("fenced: another worker took transactional id %s (same worker.name); consuming stopped: %v", id, err),
		"another worker with this worker.name started: this one stops consuming and commits nothing more; give each worker its own name"
	if isFenced(err) {
		s.m.txns.WithLabelValues("fenced").Inc()
	} else {
		name, detail, why = "kafka_transactions_failed", fmt.Sprintf("the transactional producer %s failed: consuming stopped, restart the worker: %v", id, err),
			"the transactional producer cannot go on: this worker stops consuming and commits nothing more; restart it"
	}
	s.log.Error(name, "transactional_id", id, "error", err.Error(), "detail", why)
	s.app.Events().State(name, map[string]any{"transactional_id": id, "error": err.Error()})
	s.app.SetReady("kafka", detail)
	s.resetAll(detail)
}

// failSession handles an error the session cannot go on from: fenced, it
// fences; otherwise the poll loop ends and Run starts a new session.
func (s *transactions) failSession(ctx context.Context, err error) {
	if !isFenced(err) {
		if ferr := s.supplanted(ctx); ferr != nil {
			err = ferr
		}
	}
	if isFenced(err) {
		s.fence(err)
		return
	}
	if s.restart.Swap(true) {
		return
	}
	s.log.Warn("kafka_transaction_session_restart", "transactional_id", s.wcfg.TransactionalID(), "error", err.Error(),
		"detail", "the transactional producer cannot go on: a new consumer and producer session starts; work since the last commit is read again")
	s.app.Events().State("kafka_transaction_session_restart", map[string]any{"transactional_id": s.wcfg.TransactionalID(), "error": err.Error()})
}

// producerEpoch is the producer id and epoch the session's transactions
// last ran under.
type producerEpoch struct {
	id    int64
	epoch int16
}

// noteProducer remembers the producer id and epoch after a transaction
// ended (KIP-890 bumps the epoch); franz-go has them loaded, so this sends
// nothing.
func (s *transactions) noteProducer(ctx context.Context) {
	if id, epoch, err := s.cl.ProducerID(ctx); err == nil && id >= 0 {
		s.producer.Store(&producerEpoch{id, epoch})
	}
}

// txnTimedOut reports whether the last transaction had been open for the
// transaction timeout, long enough for the coordinator to abort it.
func (s *transactions) txnTimedOut() bool {
	timeout := 40 * time.Second // franz-go's default
	if d, ok := s.cl.OptValue(kgo.TransactionTimeout).(time.Duration); ok && d > 0 {
		timeout = d
	}
	return !s.txnBegan.IsZero() && time.Since(s.txnBegan) >= timeout
}

// supplanted tells, before a failed session restarts, whether another
// producer took the transactional id (another producer id, or a higher
// epoch than this worker's last transaction): a newer worker's refusal can
// arrive as INVALID_TXN_STATE or INVALID_PRODUCER_EPOCH, and restarting
// would fence it in turn. An epoch one higher after a transaction open for
// the transaction timeout is the coordinator's own abort (a long network
// partition): the session restarts (KIP-588). nil when it cannot tell.
func (s *transactions) supplanted(ctx context.Context) error {
	known := s.producer.Load()
	if known == nil || s.cl == nil {
		return nil
	}
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	txid := s.wcfg.TransactionalID()
	ds, err := kadm.NewClient(s.cl).DescribeTransactions(dctx, txid)
	if err != nil {
		return nil
	}
	d, ok := ds[txid]
	if !ok || d.Err != nil || (d.ProducerID == known.id && d.ProducerEpoch <= known.epoch) {
		return nil
	}
	if d.ProducerID == known.id && d.ProducerEpoch == known.epoch+1 && s.txnTimedOut() {
		s.log.Info("kafka_transaction_timed_out", "transactional_id", txid, "producer_id", d.ProducerID, "epoch", d.ProducerEpoch,
			"open_for", time.Since(s.txnBegan).Round(time.Second).String(),
			"detail", "the transaction coordinator aborted this worker's transaction on its timeout (epoch bumped once): not another worker; the session restarts")
		return nil
	}
	return fmt.Errorf("%w: the transaction coordinator holds %s under producer %d epoch %d, this worker's last transaction ran under producer %d epoch %d",
		kerr.ProducerFenced, txid, d.ProducerID, d.ProducerEpoch, known.id, known.epoch)
}

// restartSession replaces a failed session: the work in flight is
// forgotten, the old client closed, and after a backoff (1 s doubling to
// 30 s while restarts follow each other) a new one joins. false: ctx
// ended, or no client could be built (fenced).
func (s *transactions) restartSession(ctx context.Context) bool {
	s.restart.Store(false)
	s.producer.Store(nil) // the new session's producer is learnt anew
	s.flow.detach()
	s.resetAll("the transactional session restarts")
	s.client().CloseAllowingRebalance() // its revoke callbacks forget the partitions
	s.setClient(nil)                    // none until the new one exists
	s.txnReset.Store(false)
	if time.Since(s.restartedAt) > time.Minute {
		s.restartBackoff = 0
	}
	s.restartBackoff = min(max(2*s.restartBackoff, time.Second), 30*time.Second)
	select {
	case <-time.After(s.restartBackoff):
	case <-ctx.Done():
		return false
	}
	if err := s.connect(); err != nil {
		s.fence(fmt.Errorf("a new transactional session could not be built: %w", err))
		return false
	}
	s.restartedAt = time.Now()
	s.flow.attach(s.Source)
	// Loading the producer id now (InitProducerId) makes the coordinator
	// abort the broken session's open transaction at once: until then its
	// pending offset commit keeps the new consumer from reading committed
	// offsets, for up to the transaction timeout. A failure here is met
	// again, and handled, by the session's first transaction.
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	_, _, _ = s.client().ProducerID(pctx)
	cancel()
	s.log.Info("kafka_transaction_session_restarted", "transactional_id", s.wcfg.TransactionalID())
	return true
}

// isFenced reports an error that means another producer holds the
// transactional id, or another member the static group instance id.
func isFenced(err error) bool {
	return errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.FencedInstanceID)
}

// isAbortable reports an End error after which the session still works.
func isAbortable(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, kerr.TransactionAbortable) ||
		errors.Is(err, kerr.ConcurrentTransactions) || errors.Is(err, kerr.CoordinatorNotAvailable) ||
		errors.Is(err, kerr.NotCoordinator) || errors.Is(err, kerr.RequestTimedOut)
}
