package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"svc/kafkaread/kconn"
	"svc/worker"
	"svc/worker/config"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Source is the consumer-group input: a poll loop that hands batches to the
// handler's Arrange, runs each message's tasks, delivers the results and
// commits offsets once every task of a message reached its sinks or the DLQ
// (at-least-once: the commit point of a partition is its highest contiguous
// finished offset + 1). It uses only the App's exported API, like the HTTP
// ingress.
//
// Ownership: the poll loop is the only caller of PollRecords and Arrange.
// parts, lanes and the in-flight count are guarded by mu; message workers
// and the rebalance callbacks take it briefly.
type Source struct {
	app   *worker.App
	wcfg  *config.Config
	cfg   config.KafkaSource
	topic string
	log   *slog.Logger
	flow  *flowControl
	m     *sourceMetrics

	cl       *kgo.Client
	live     atomic.Bool
	mu       sync.Mutex
	parts    map[int32]*partState
	lanes    map[laneKey][]*msgWork // per partition+key FIFO; head is running
	inflight int
	held     bool // backpressure holds intake: from max_in_flight until below half
	// commitMu serialises commits (interval, revoke, shutdown) so a slower
	// one can never move a partition's committed offset backwards.
	commitMu sync.Mutex
	room     chan struct{} // signalled when in-flight work finishes
	maxIn    int
	onCommit func(map[int32]int64) // test hook: every successful commit
}

type laneKey struct {
	partition int32
	key       string
}

// msgWork is one polled message and its arranged tasks.
type msgWork struct {
	msg        *worker.Message
	epoch      int32
	tasks      []worker.Task
	part       *partState
	lane       *laneKey
	arrangeErr error // Arrange failed: the tasks go to the DLQ unrun
}

type sourceMetrics struct {
	polled    prometheus.Counter
	commits   *prometheus.CounterVec
	stalled   prometheus.Gauge
	inflight  prometheus.Gauge
	rebalance *prometheus.CounterVec
}

func newSourceMetrics(reg prometheus.Registerer) *sourceMetrics {
	m := &sourceMetrics{
		polled: prometheus.NewCounter(prometheus.CounterOpts{Name: "svc_kafka_records_polled_total", Help: "Records polled from the source topic."}),
		commits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "svc_kafka_commits_total", Help: "Offset commits of the consumer group, by result.",
		}, []string{"result"}),
		stalled: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "svc_kafka_partitions_stalled", Help: "Partitions stall-paused after a failed DLQ send (until restart or revoke).",
		}),
		inflight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "svc_kafka_messages_in_flight", Help: "Polled messages not yet delivered or dead-lettered.",
		}),
		rebalance: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "svc_kafka_rebalance_events_total", Help: "Partition assignment changes, by kind.",
		}, []string{"kind"}),
	}
	reg.MustRegister(m.polled, m.commits, m.stalled, m.inflight, m.rebalance)
	return m
}

// New builds the Kafka source of app (sources.kafka); it connects nothing
// until Run. log is the base logger.
func New(app *worker.App, reg prometheus.Registerer, log *slog.Logger) *Source {
	cfg := app.Config()
	return &Source{
		app: app, wcfg: cfg, cfg: cfg.Sources.Kafka, topic: cfg.Sources.Kafka.Topic,
		flow: newFlowControl(cfg, reg, log.With("component", "flow"), app.Events()),
		log:  log.With("component", "kafka_source"), m: newSourceMetrics(reg),
		parts: map[int32]*partState{}, lanes: map[laneKey][]*msgWork{},
		room: make(chan struct{}, 1), maxIn: cfg.Pipeline.MaxInFlight,
	}
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
	// The default client id first: client_config's client.id overrides it.
	opts := append([]kgo.Opt{kgo.ClientID("svc-" + s.wcfg.Worker.Name)}, copts...)
	opts = append(opts, gopts...)
	opts = append(opts,
		kgo.ConsumerGroup(s.cfg.Group),
		kgo.ConsumeTopics(s.topic),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.Balancers(kgo.CooperativeStickyBalancer()),
		kgo.OnPartitionsAssigned(s.assigned),
		kgo.OnPartitionsRevoked(s.revoked),
		kgo.OnPartitionsLost(s.lost),
	)
	if s.cfg.StartupAlignEnabled {
		opts = append(opts, kgo.InstanceID(s.wcfg.Worker.Name))
	}
	return kgo.NewClient(opts...)
}

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
	s.mu.Lock()
	s.cl = cl
	s.mu.Unlock()
	s.live.Store(true)
	s.flow.attach(s)
	commitDone := make(chan struct{})
	commitCtx, stopCommits := context.WithCancel(context.Background())
	go func() { defer close(commitDone); s.commitLoop(commitCtx) }()

	s.pollLoop(ctx)

	// Intake stopped: let the work in flight finish, then commit it.
	s.flow.detach()
	s.live.Store(false)
	s.drainAll(s.wcfg.Worker.ShutdownTimeout.D())
	stopCommits()
	<-commitDone
	cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	s.commit(cctx, nil)
	cancel()
	cl.CloseAllowingRebalance()
	s.app.SetReady("kafka", "consumer stopped")
	return nil
}

func (s *Source) pollLoop(ctx context.Context) {
	for ctx.Err() == nil {
		room := s.waitRoom(ctx)
		if room == 0 {
			continue
		}
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		fetches := s.cl.PollRecords(pctx, min(room, s.cfg.MaxPollRecords))
		cancel()
		if fetches.IsClientClosed() {
			return
		}
		fetches.EachError(func(_ string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				s.log.Warn("kafka_fetch_error", "partition", p, "error", err.Error())
			}
		})
		if fetches.NumRecords() > 0 {
			s.dispatch(ctx, fetches)
		}
		s.cl.AllowRebalance()
	}
}

// waitRoom waits until fewer than max_in_flight messages are in flight and
// backpressure does not hold intake, and returns how many more may be
// polled (0 when ctx ended or after a tick). It never polls while
// backpressure holds: a poll of a paused topic makes the client drop what
// it fetched, which it then fetches again after the resume.
func (s *Source) waitRoom(ctx context.Context) int {
	for {
		s.mu.Lock()
		room := s.maxIn - s.inflight
		if s.held {
			room = 0
		}
		s.mu.Unlock()
		if room > 0 {
			return room
		}
		select {
		case <-s.room:
		case <-ctx.Done():
			return 0
		case <-time.After(time.Second):
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
		m := worker.Message{Source: worker.SourceKafka, Alias: "source", Topic: r.Topic, Partition: r.Partition, Offset: r.Offset,
			Key: r.Key, Value: r.Value, Timestamp: r.Timestamp}
		for _, h := range r.Headers {
			m.Headers = append(m.Headers, worker.Header{Key: h.Key, Value: h.Value})
		}
		batch = append(batch, m)
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
	var start []*msgWork
	for i := range batch {
		m := &batch[i]
		p := s.parts[m.Partition]
		if p == nil { // revoked meanwhile: another member re-reads it
			continue
		}
		p.add(m.Offset, epochs[i])
		s.inflight++
		w := &msgWork{msg: m, epoch: epochs[i], tasks: byMsg[msgAt{m.Partition, m.Offset}], part: p, arrangeErr: arrangeErr}
		if m.Key != nil {
			k := laneKey{m.Partition, string(m.Key)}
			w.lane = &k
			q := s.lanes[k]
			s.lanes[k] = append(q, w)
			if len(q) > 0 { // an earlier message of this key runs; this one waits
				continue
			}
		}
		start = append(start, w)
	}
	s.updateBackpressureLocked()
	s.mu.Unlock()
	for _, w := range start {
		s.start(w)
	}
}

// PauseState returns the consume pause state object.
func (s *Source) PauseState() PauseState { return s.flow.State() }

// Pause pauses intake for seconds (1-3600); a pause while paused moves the
// deadline. Errors: ErrPauseDisabled, ErrConsumerNotRunning, *DurationError.
func (s *Source) Pause(seconds int64) (PauseState, error) { return s.flow.Pause(seconds) }

// Resume ends a consume pause; idempotent. Partitions stay paused while
// backpressure still holds them.
func (s *Source) Resume() (PauseState, error) { return s.flow.Resume() }
