package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"svc/worker"
	"svc/worker/config"
	"svc/worker/kconn"
	"svc/worker/sink"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Source is the consumer-group input: a poll loop that hands batches to the
// handler's Arrange, queues each message behind its partition and key (see
// queue.go), runs it, delivers the results and commits offsets once every
// task of a message reached its sinks or the DLQ (at-least-once: the commit
// point of a partition is its highest contiguous finished offset + 1). It
// uses only the App's exported API, like the HTTP ingress.
//
// Ownership: the poll loop is the only caller of PollRecords and Arrange.
// parts, their queues and the counts are guarded by mu; message workers
// and the rebalance callbacks take it briefly. Every pause of fetching goes
// through flow.
type Source struct {
	app   *worker.App
	wcfg  *config.Config
	cfg   config.KafkaSource
	topic string
	log   *slog.Logger
	flow  *flowControl
	m     *sourceMetrics
	lim   limits
	sizer *fetchSizer
	// reach tells from the client's hooks whether any broker answers
	// (reach.go).
	reach *reach

	cl   *kgo.Client
	live atomic.Bool
	// c is the delivery guarantee, chosen once (Delivery).
	c committer
	// Exactly-once: staged and stagedBytes count the finished messages
	// whose results wait in the outboxes for their transaction.
	staged      int
	stagedBytes int64
	fenced      atomic.Pointer[error] // set once: consuming stopped for good
	mu          sync.Mutex
	parts       map[int32]*partState
	ring        []*partState // partitions with ready messages, served in turn
	running     int          // messages started and not finished
	executing   int          // of them, those whose tasks have not ended
	// deliverBytes is the results' bytes of the running messages whose
	// tasks ended (their deliveries are under way).
	deliverBytes int64
	waiting      int // messages polled and not started
	waitBytes    int64
	held         bool // backpressure: waiting work over its cap until below half
	heldSet      bool // held as last given to flow
	// commitMu serialises commits (interval, resume, revoke, shutdown) so a
	// slower one can never move a partition's committed offset backwards.
	commitMu  sync.Mutex
	commitNow chan struct{} // asks the commit loop for a commit now
	room      chan struct{} // signalled when a finished message may let the poll loop go on
	// roomWaits counts the poll loop's waits for room (backpressure held)
	// and roomWakes the times it was woken during one and found none.
	roomWaits, roomWakes atomic.Int64
	idle                 chan job      // message goroutines waiting for a message to run
	stopped              chan struct{} // closed when Run returns: idle goroutines exit
	offsets              offsetCache
	lagEvery             time.Duration         // how often the lag gauges' offsets are read
	onCommit             func(map[int32]int64) // test hook: every successful commit
	liveness             Liveness              // the fleet's view of live workers (SetLiveness); nil: none
	peerFlow             PeerFlow              // the fleet cards' paused and stalled partitions (SetPeerFlow); nil: none
}

// msgWork is one polled message and its arranged tasks.
type msgWork struct {
	msg   *worker.Message
	epoch int32
	size  int64 // key + value bytes, for the waiting-bytes caps
	// resultBytes is the bytes of its results, for the delivering cap.
	resultBytes int64
	tasks       []worker.Task
	part        *partState
	arrangeErr  error // Arrange failed: the tasks go to the DLQ unrun
	started     bool
	startedAt   time.Time // when it started (the head-of-line view)
	dropped     bool
}

// committer is how finished work becomes committed: at least once
// (commit.go: results delivered, then offsets committed every
// commit_interval) or exactly once (txn.go: results and offsets in one
// Kafka transaction). It is chosen once, where the source is built
// (Delivery); the rest of the source is the same for both.
type committer interface {
	// newClient builds the consumer from the source's options.
	newClient(opts []kgo.Opt) (*kgo.Client, error)
	// background runs beside the poll loop until ctx ends.
	background(ctx context.Context)
	// turn runs at the top of every poll loop turn; false ends the loop.
	turn(ctx context.Context) bool
	// again replaces a client whose poll loop ended on its own (false:
	// Run stops).
	again(ctx context.Context) bool
	// pollWait bounds one wait of the poll loop.
	pollWait() time.Duration
	// finished sees to the results of j's message, whose tasks ended; it
	// returns the messages admitted meanwhile, held.
	finished(j job, taskCtx context.Context, results []worker.TaskResult) []job
	// last commits what finished, at shutdown.
	last(ctx context.Context)
	// onRevoked and onLost take partitions away (the rebalance
	// callbacks revoked and lost).
	onRevoked(ctx context.Context, ps []int32)
	onLost(ps []int32)
	// memberFenced stops consuming after the group refused this worker's
	// static membership.
	memberFenced(err error)
	// transactional: a finished message may make a transaction due (it
	// wakes the poll loop), and only committed records are read.
	transactional() bool
}

// Delivery is the source's guarantee, chosen by the builder:
// AtLeastOnce, or ExactlyOnce with the worker's sinks.
type Delivery func(*Source) committer

// AtLeastOnce delivers every result, then commits its offset.
func AtLeastOnce() Delivery { return func(s *Source) committer { return atLeastOnce{s} } }

// ExactlyOnce commits results and offsets in Kafka transactions
// (sources.kafka.delivery = "exactly_once"); sinks build the records.
func ExactlyOnce(sinks *sink.Set) Delivery {
	return func(s *Source) committer { return &transactions{Source: s, sinks: sinks} }
}

// New builds the Kafka source of app (sources.kafka) with delivery d; it
// connects nothing until Run. log is the base logger.
func New(app *worker.App, d Delivery, reg prometheus.Registerer, log *slog.Logger) *Source {
	cfg := app.Config()
	s := &Source{
		app: app, wcfg: cfg, cfg: cfg.Sources.Kafka, topic: cfg.Sources.Kafka.Topic,
		flow: newFlowControl(cfg, reg, log.With("component", "flow"), app.Events()),
		log:  log.With("component", "kafka_source"), m: newSourceMetrics(reg), lim: newLimits(cfg),
		sizer: newFetchSizer(cfg.Sources.Kafka.FetchBufferBytes, cfg.Sources.Kafka.ClientConfig, reg),
		parts: map[int32]*partState{}, commitNow: make(chan struct{}, 1), room: make(chan struct{}, 1),
		idle: make(chan job), stopped: make(chan struct{}),
		lagEvery: lagInterval, reach: newReach(),
	}
	s.c = d(s)
	s.flow.onRelease = s.commitSoon
	reg.MustRegister(newPartitionCollector(s))
	return s
}

// client builds the group consumer: manual commits, rebalance callbacks that
// drain and commit, static membership when startup alignment is on.
func (s *Source) client() (*kgo.Client, error) {
	conn := s.wcfg.SourceConn()
	copts, err := kconn.Opts(conn)
	if err != nil {
		return nil, err
	}
	gopts, err := kconn.GroupOpts(conn)
	if err != nil {
		return nil, err
	}
	// Defaults first, so client_config overrides them: the client id, and
	// Kafka's own 500 ms fetch wait instead of the client library's 5 s. A
	// partition resumed after backpressure or a consume pause joins the next
	// fetch, so the long-poll wait is the pause a resume can cost.
	opts := append([]kgo.Opt{kgo.ClientID("svc-" + s.wcfg.Worker.Name), kgo.FetchMaxWait(fetchMaxWait)}, copts...)
	opts = append(opts, gopts...)
	// After client_config: the first fetch's size is the sizer's, and
	// fetch.max.bytes, when set, is its ceiling.
	opts = append(opts, s.sizer.opts()...)
	opts = append(opts,
		kgo.ConsumerGroup(s.cfg.Group),
		kgo.ConsumeTopics(s.topic),
		kgo.BlockRebalanceOnPoll(),
		kgo.Balancers(kgo.CooperativeStickyBalancer()),
		kgo.OnPartitionsAssigned(s.assigned),
		kgo.OnPartitionsRevoked(s.revoked),
		kgo.OnPartitionsLost(s.lost),
		kgo.WithHooks(s.reach),
	)
	// Every batch decompresses within MaxBatchBytes, and one fetch
	// response within sources.kafka.fetch_buffer_bytes beyond its first
	// batch, whatever the codec (a batch past that is fetched again, not
	// decompressed twice): see kconn.Decompressor.
	opts = append(opts, kconn.NewDecompressor(MaxBatchBytes, int(min(s.cfg.FetchBufferBytes, MaxBatchBytes))).Opts()...)
	if s.cfg.StartupAlignEnabled {
		opts = append(opts, kgo.InstanceID(s.wcfg.Worker.Name))
	}
	return s.c.newClient(opts)
}

// fetchMaxWait is the consumer's default long-poll wait (client_config
// fetch.max.wait.ms). Kafka's own clients wait 500 ms, but a fetch
// waiting on partitions that have nothing new holds the broker's
// connection: no other fetch goes to that broker until it returns, so a
// partition resumed after its queue cap, backpressure or a consume pause
// waits up to this long for records it could have at once. In a backlog
// whose partitions run dry at different times that stalled the whole
// worker about 400 ms at a time (bench/speed.sh, Kafka: 10,100-13,100
// msgs/s at 500 ms, 14,300-15,900 at 100 ms, same rounds). An idle
// consumer sends a fetch a broker every 100 ms for it.
const fetchMaxWait = 100 * time.Millisecond

// alignDelay is how long to wait for the next multiple of align seconds of
// wall-clock time, so a fleet restarting together joins at one instant.
// Multiples are counted from the Unix epoch, so workers agree whatever the
// period.
func alignDelay(now time.Time, align int) time.Duration {
	period := int64(align) * int64(time.Second)
	ns := now.UnixNano()
	return time.Duration((ns/period+1)*period - ns)
}

// Run consumes until ctx ends, then drains in-flight messages within the
// shutdown timeout, commits and closes the client.
func (s *Source) Run(ctx context.Context) error {
	s.app.SetReady("kafka", "consumer group not joined yet")
	if s.cfg.StartupAlignEnabled {
		d := alignDelay(time.Now(), s.cfg.StartupAlignSeconds)
		s.log.Info("kafka_startup_aligned", "join_in", d.String(), "instance_id", s.wcfg.Worker.Name)
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return nil
		}
	}
	cl, err := s.client()
	if err != nil {
		return fmt.Errorf("kafka source: %w", err)
	}
	s.sizer.attach(cl)
	s.mu.Lock()
	s.cl = cl
	s.mu.Unlock()
	s.live.Store(true)
	s.flow.attach(s)
	var bg sync.WaitGroup
	bgCtx, stopBG := context.WithCancel(context.Background())
	bg.Go(func() { s.c.background(bgCtx) })
	bg.Go(func() { s.lagLoop(bgCtx) })
	s.reach.lastOK.Store(time.Now().UnixNano()) // silence counts from the first connection
	bg.Go(func() { s.reachLoop(bgCtx) })

	s.pollLoop(ctx)
	for ctx.Err() == nil && s.c.again(ctx) {
		s.pollLoop(ctx)
	}
	s.mu.Lock()
	cl = s.cl // a restarted session's
	s.mu.Unlock()

	// Intake stopped: what has not started is dropped (it is read again
	// next time), what runs finishes, then it is committed.
	s.flow.detach()
	s.live.Store(false)
	s.mu.Lock()
	s.dropAllWaitingLocked()
	s.mu.Unlock()
	s.drainAll(s.wcfg.Worker.ShutdownTimeout.D())
	close(s.stopped)
	stopBG()
	bg.Wait()
	if cl != nil { // nil: a session restart ended with the shutdown
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		s.c.last(cctx) // what finished commits
		cancel()
		cl.CloseAllowingRebalance()
	}
	if s.fenced.Load() != nil {
		// Fenced or failed: not ready, saying why, until the worker stops.
		<-ctx.Done()
		return nil
	}
	s.leaveStatic()
	s.app.SetReady("kafka", "consumer stopped")
	return nil
}

func (s *Source) pollLoop(ctx context.Context) {
	for ctx.Err() == nil {
		if !s.c.turn(ctx) {
			return
		}
		room := s.waitRoom(ctx)
		if room == 0 {
			continue
		}
		pctx, cancel := context.WithTimeout(ctx, s.c.pollWait())
		fetches := s.cl.PollRecords(pctx, room)
		cancel()
		if fetches.IsClientClosed() {
			return
		}
		var fencedErr error
		fetches.EachError(func(_ string, p int32, err error) {
			tooLarge, isTooLarge := errors.AsType[*kgo.ErrDecompressTooLarge](err)
			switch {
			case kconn.IsWindowFull(err):
				// A batch deferred to the next fetch (the fetch's
				// decompression budget was spent).
			case isTooLarge:
				s.batchTooLarge(tooLarge)
			case errors.Is(err, kerr.FencedInstanceID):
				fencedErr = err
			case !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled):
				s.log.Warn("kafka_fetch_error", "partition", p, "error", err.Error())
			}
		})
		if fencedErr != nil {
			s.c.memberFenced(fencedErr)
			return
		}
		if fetches.NumRecords() > 0 {
			s.dispatch(ctx, fetches)
		}
		s.cl.AllowRebalance()
	}
}

// MaxBatchBytes is the most one batch of the source topic may decompress
// to. A larger batch stalls its partition: the client stops fetching it,
// the worker logs kafka_batch_too_large once and counts it
// (svc_kafka_batches_too_large_total), its records are neither processed
// nor skipped, and the other partitions go on. The partition is fetched
// again (and refused again) when it is assigned anew: at a restart or a
// rebalance.
const MaxBatchBytes = 64 << 20

// batchTooLarge reports a batch over MaxBatchBytes: its partition stalls.
func (s *Source) batchTooLarge(e *kgo.ErrDecompressTooLarge) {
	s.sizer.tooLarge.Inc()
	s.log.Error("kafka_batch_too_large", "partition", e.Partition, "offset", e.Offset, "next_offset", e.NextOffset, "max_batch_bytes", MaxBatchBytes,
		"detail", fmt.Sprintf("the batch of offsets %d-%d decompresses to more than %d MiB: the partition is stalled at it (nothing is lost or skipped; the other partitions go on) until the worker restarts or the partition is reassigned; have the producer write smaller batches, or move the group's offset past %d with Kafka's tools to skip them",
			e.Offset, e.NextOffset-1, MaxBatchBytes>>20, e.NextOffset-1))
}

// waitRoom waits until backpressure lets intake run and returns how many
// records the next poll may take (0 when ctx ended or after a tick). It
// never polls while backpressure holds: a poll of a paused topic makes the
// client drop what it fetched, which it then fetches again after the
// resume.
func (s *Source) waitRoom(ctx context.Context) int {
	for woken := false; ; woken = true {
		s.mu.Lock()
		room := s.pollRoomLocked()
		s.mu.Unlock()
		if room > 0 {
			return room
		}
		if woken {
			s.roomWakes.Add(1)
		} else {
			s.roomWaits.Add(1)
		}
		select {
		case <-s.room:
			if s.c.transactional() {
				return 0 // a message was staged: a transaction may be due
			}
		case <-ctx.Done():
			return 0
		case <-time.After(s.c.pollWait()):
			return 0
		}
	}
}

// dispatch arranges a polled batch and starts its messages.
func (s *Source) dispatch(ctx context.Context, fetches kgo.Fetches) {
	n := fetches.NumRecords()
	s.m.polled.Add(float64(n))
	batch := make([]worker.Message, 0, n)
	epochs := make([]int32, 0, n)
	fetches.EachRecord(func(r *kgo.Record) {
		batch = append(batch, copyRecord(r))
		epochs = append(epochs, r.LeaderEpoch)
	})
	tasks, arrangeErr := s.app.Arrange(context.WithoutCancel(ctx), batch)
	if arrangeErr != nil {
		// A batch the handler cannot arrange goes to the DLQ message by
		// message, so the partition moves on and nothing is lost.
		s.log.Error("arrange_failed", "error", arrangeErr.Error(), "records", n)
		tasks = nil
		for i := range batch {
			tasks = append(tasks, worker.Task{ID: s.app.IDs().Next(), Msg: &batch[i], Input: batch[i].Value})
		}
	}
	// Tasks are matched to messages by partition and offset, not by
	// pointer: a handler may point a task at its own copy of the message
	// (for _, m := range batch { ... &m ... }), and such a message must not
	// be committed unprocessed.
	type msgAt struct {
		partition int32
		offset    int64
	}
	byMsg := make(map[msgAt][]worker.Task, n)
	for _, t := range tasks {
		if t.Msg == nil {
			s.log.Error("arrange_task_without_message", "task_id", t.ID)
			continue
		}
		if t.ID == "" {
			t.ID = s.app.IDs().Next()
		}
		at := msgAt{t.Msg.Partition, t.Msg.Offset}
		byMsg[at] = append(byMsg[at], t)
	}
	s.mu.Lock()
	var touched []*partState
	for i := range batch {
		m := &batch[i]
		p := s.parts[m.Partition]
		if p == nil || p.stalled { // revoked meanwhile, or stalled: read again later
			continue
		}
		s.enqueueLocked(&msgWork{msg: m, epoch: epochs[i], size: int64(len(m.Key) + len(m.Value)),
			tasks: byMsg[msgAt{m.Partition, m.Offset}], part: p, arrangeErr: arrangeErr})
		if !slices.Contains(touched, p) {
			touched = append(touched, p)
		}
	}
	start := s.settleLocked(touched...)
	s.mu.Unlock()
	s.start(s.jobs(start))
}

// SetExecutorHold holds all intake while the executor is unavailable (on)
// and releases it when the executor is back: nothing more is fetched, the
// messages in flight wait for the executor, nothing is committed past
// them. The builder wires it to the executor pool's health.
func (s *Source) SetExecutorHold(on bool) { s.flow.setExecutorHold(on) }

// PauseState returns the consume pause state object.
func (s *Source) PauseState() PauseState { return s.flow.State() }

// Pause pauses intake for seconds (1-3600); a pause while paused moves the
// deadline. Errors: ErrPauseDisabled, ErrConsumerNotRunning, *DurationError.
func (s *Source) Pause(seconds int64) (PauseState, error) { return s.flow.Pause(seconds) }

// Resume ends a consume pause; idempotent. Partitions stay paused while
// backpressure still holds them.
func (s *Source) Resume() (PauseState, error) { return s.flow.Resume() }

// copyRecord makes the message of r with its own copy of the key, value
// and headers (one allocation). A record's bytes point into its whole
// decompressed batch (or, uncompressed, the whole fetch response): kept,
// one waiting message would pin the batch, and the waiting messages of a
// few partitions, polled from a dozen batches, would keep megabytes alive
// for kilobytes of records. Nil keys, values and header values stay nil.
func copyRecord(r *kgo.Record) worker.Message {
	n := len(r.Key) + len(r.Value)
	for _, h := range r.Headers {
		n += len(h.Value)
	}
	buf := make([]byte, 0, n)
	take := func(b []byte) []byte {
		if b == nil {
			return nil
		}
		at := len(buf)
		buf = append(buf, b...)
		return buf[at:len(buf):len(buf)]
	}
	m := worker.Message{Source: worker.SourceKafka, Alias: "source", Topic: r.Topic, Partition: r.Partition, Offset: r.Offset,
		Key: take(r.Key), Value: take(r.Value), Timestamp: r.Timestamp}
	if len(r.Headers) > 0 {
		m.Headers = make([]worker.Header, len(r.Headers))
		for i, h := range r.Headers {
			m.Headers[i] = worker.Header{Key: strings.Clone(h.Key), Value: take(h.Value)}
		}
	}
	return m
}
