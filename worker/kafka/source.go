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
	"svc/worker/model"
	"svc/worker/sink"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Source is the consumer-group input (see the package doc). It uses only
// the App's exported API, like the HTTP ingress.
//
// Ownership: the poll loop is the only caller of PollRecords and Arrange;
// parts, their queues and the counts are guarded by mu.
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
	dec   atomic.Pointer[kconn.Decompressor] // the consumer's, for its counts
	reach *reach                             // whether any broker answers (reach.go)

	cl   *kgo.Client // written under mu, only while no poll loop runs
	live atomic.Bool
	c    committer // the delivery guarantee (Delivery)
	// Exactly-once: the finished messages whose results wait in the
	// outboxes for their transaction.
	staged      int
	stagedBytes int64
	fenced      atomic.Pointer[error] // set once: consuming stopped for good
	mu          sync.Mutex
	parts       map[int32]*partState
	ring        []*partState // partitions with ready messages, served in turn
	running     int          // messages started and not finished
	executing   int          // of them, those whose tasks have not ended
	// deliverBytes: results of the running messages whose tasks ended.
	deliverBytes int64
	waiting      int // messages polled and not started
	waitBytes    int64
	held         bool // backpressure: waiting work over its cap until below half
	heldSet      bool // held as last given to flow
	// commitMu serialises commits so a slower one can never move a
	// partition's committed offset backwards.
	commitMu  sync.Mutex
	commitNow chan struct{} // asks the commit loop for a commit now
	room      chan struct{} // signalled when a finished message may let the poll loop go on
	// roomWaits counts the poll loop's waits for room, roomWakes the times
	// it was woken during one and found none.
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
	msg         *model.Message
	epoch       int32
	size        int64 // key + value bytes, for the waiting-bytes caps
	resultBytes int64 // its results' bytes, for the delivering cap
	tasks       []model.Task
	part        *partState
	arrangeErr  error // Arrange failed: the tasks go to the DLQ unrun
	started     bool
	startedAt   time.Time // when it started (the head-of-line view)
	dropped     bool
}

// committer is how finished work becomes committed: at least once
// (commit.go) or exactly once (txn.go).
type committer interface {
	newClient(opts []kgo.Opt) (*kgo.Client, error)
	background(ctx context.Context) // beside the poll loop until ctx ends
	turn(ctx context.Context) bool  // top of every poll loop turn; false ends the loop
	again(ctx context.Context) bool // replaces a client whose poll loop ended on its own
	pollWait() time.Duration        // bounds one wait of the poll loop
	// finished sees to the results of j's message, whose tasks ended; it
	// returns the messages admitted meanwhile, held.
	finished(j job, taskCtx context.Context, results []model.TaskResult) []job
	last(ctx context.Context) // commits what finished, at shutdown
	onRevoked(ctx context.Context, ps []int32)
	onLost(ps []int32)
	memberFenced(err error) // the group refused this static member
	// transactional: a finished message may make a transaction due, and
	// only committed records are read.
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

// client is the consumer's client (nil while none runs).
func (s *Source) client() *kgo.Client {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cl
}

func (s *Source) setClient(cl *kgo.Client) {
	s.mu.Lock()
	s.cl = cl
	s.mu.Unlock()
}

// connect builds the group consumer and makes it the source's client.
func (s *Source) connect() error {
	cl, err := s.newConsumer()
	if err != nil {
		return err
	}
	s.sizer.attach(cl)
	s.setClient(cl)
	return nil
}

// newConsumer builds the group consumer: rebalance callbacks, static
// membership when startup alignment is on, the committer's options.
func (s *Source) newConsumer() (*kgo.Client, error) {
	conn := s.wcfg.SourceConn()
	copts, err := kconn.Opts(conn)
	if err != nil {
		return nil, err
	}
	gopts, err := kconn.GroupOpts(conn)
	if err != nil {
		return nil, err
	}
	// Defaults first, so client_config overrides them.
	opts := append([]kgo.Opt{kgo.ClientID("svc-" + s.wcfg.Worker.Name), kgo.FetchMaxWait(fetchMaxWait)}, copts...)
	opts = append(opts, gopts...)
	opts = append(opts, s.sizer.opts()...) // after client_config: fetch.max.bytes is only its ceiling
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
	// A batch decompresses within MaxBatchBytes, a fetch response within
	// fetch_buffer_bytes beyond its first batch, the records' overhead
	// counted as the sizer counts it (kconn.Decompressor).
	dec := kconn.NewDecompressor(MaxBatchBytes, int(min(s.cfg.FetchBufferBytes, MaxBatchBytes))).PerRecord(recordOverhead)
	opts = append(opts, dec.Opts()...)
	s.dec.Store(dec)
	if s.cfg.StartupAlignEnabled {
		opts = append(opts, kgo.InstanceID(s.wcfg.Worker.Name))
	}
	return s.c.newClient(opts)
}

// fetchMaxWait is the consumer's default long-poll wait (client_config
// fetch.max.wait.ms): a resumed partition waits for the fetch already
// waiting at its broker, and Kafka's 500 ms made a backlog about 30 %
// slower (docs/operations.md "Intake queues").
const fetchMaxWait = 100 * time.Millisecond

// alignDelay is how long to wait for the next multiple of align seconds
// since the Unix epoch, so a fleet restarting together joins at one instant.
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
	if err := s.connect(); err != nil {
		return fmt.Errorf("kafka source: %w", err)
	}
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
	cl := s.client() // a restarted session's

	// Intake stopped: what has not started is dropped (read again next
	// time), what runs finishes, then it is committed.
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
			case kconn.IsWindowFull(err): // deferred to the next fetch
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
// to; a larger batch stalls its partition until it is assigned anew
// (docs/operations.md "Kafka consumer memory").
const MaxBatchBytes = 64 << 20

// batchTooLarge reports a batch over MaxBatchBytes: its partition stalls.
func (s *Source) batchTooLarge(e *kgo.ErrDecompressTooLarge) {
	s.sizer.tooLarge.Inc()
	s.log.Error("kafka_batch_too_large", "partition", e.Partition, "offset", e.Offset, "next_offset", e.NextOffset, "max_batch_bytes", MaxBatchBytes,
		"detail", fmt.Sprintf("the batch of offsets %d-%d decompresses to more than %d MiB: the partition is stalled at it (nothing is lost or skipped; the other partitions go on) until the worker restarts or the partition is reassigned; have the producer write smaller batches, or move the group's offset past %d with Kafka's tools to skip them",
			e.Offset, e.NextOffset-1, MaxBatchBytes>>20, e.NextOffset-1))
}

// waitRoom waits until backpressure lets intake run and returns how many
// records the next poll may take (0 when ctx ended or after a tick). A poll
// while backpressure holds would make the client drop what it fetched.
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
	batch := make([]model.Message, 0, n)
	epochs := make([]int32, 0, n)
	fetches.EachRecord(func(r *kgo.Record) {
		batch = append(batch, copyRecord(r))
		epochs = append(epochs, r.LeaderEpoch)
	})
	tasks, arrangeErr := s.app.Arrange(context.WithoutCancel(ctx), batch)
	if arrangeErr != nil { // each message goes to the DLQ unrun (process)
		s.log.Error("arrange_failed", "error", arrangeErr.Error(), "records", n)
		tasks = nil
		for i := range batch {
			tasks = append(tasks, model.Task{ID: s.app.IDs().Next(), Msg: &batch[i], Input: batch[i].Value})
		}
	}
	// Tasks are matched to messages by partition and offset: a handler may
	// point a task at its own copy of the message.
	type msgAt struct {
		partition int32
		offset    int64
	}
	byMsg := make(map[msgAt][]model.Task, n)
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

// SetExecutorHold pauses all fetching while the executor is unavailable
// (on); the builder wires it to the executor pool's health.
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
// and headers (one allocation): a record's bytes point into its whole
// decompressed batch, which a waiting message would otherwise pin. Nil
// stays nil.
func copyRecord(r *kgo.Record) model.Message {
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
	m := model.Message{Source: model.SourceKafka, Alias: "source", Topic: r.Topic, Partition: r.Partition, Offset: r.Offset,
		Key: take(r.Key), Value: take(r.Value), Timestamp: r.Timestamp}
	if len(r.Headers) > 0 {
		m.Headers = make([]model.Header, len(r.Headers))
		for i, h := range r.Headers {
			m.Headers[i] = model.Header{Key: strings.Clone(h.Key), Value: take(h.Value)}
		}
	}
	return m
}
