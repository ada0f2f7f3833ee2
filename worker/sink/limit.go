package sink

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"svc/worker/config"
)

// DefaultMaxMessageBytes is the limit assumed when the brokers do not tell
// a topic's: Kafka's own default (message.max.bytes).
const DefaultMaxMessageBytes = 1048588

// maxLimit caps any limit: the producer refuses larger requests
// (config.MaxMessageBytesMax, less the request's own framing).
const maxLimit = config.MaxMessageBytesMax - 1024

// lookupTimeout bounds the brokers' answer about a topic's limit.
const lookupTimeout = 10 * time.Second

// recordOverhead is what a record alone in its batch costs beyond its own
// encoding, as the producer counts it: the batch header (61 bytes, all the
// broker counts) and the request's 4-byte length of the batch.
const recordOverhead = 61 + 4

// RecordSize is the size rec takes against a topic's max.message.bytes
// when it travels alone, uncompressed, at most 4 bytes more than the
// broker counts: the producer takes a record of at most its batch cap,
// whatever the codec.
func RecordSize(rec *kgo.Record) int {
	return recordSize(len(rec.Key), len(rec.Value), rec.Headers)
}

func recordSize(keyLen, valueLen int, headers []kgo.RecordHeader) int {
	n := 1 + 1 + 1 + // attributes, timestamp delta, offset delta (all 0)
		varintLen(keyLen) + keyLen + varintLen(valueLen) + valueLen + varintLen(len(headers))
	for _, h := range headers {
		n += varintLen(len(h.Key)) + len(h.Key) + varintLen(len(h.Value)) + len(h.Value)
	}
	return recordOverhead + varintLen(n) + n
}

// varintLen is the size of n as a zigzag varint.
func varintLen(n int) int {
	u := uint64(n) << 1
	if n < 0 {
		u = ^u
	}
	l := 1
	for u >= 0x80 {
		u >>= 7
		l++
	}
	return l
}

// isTooLarge reports whether a produce failed for the record's size: the
// producer's own check or the broker's answer.
func isTooLarge(err error) bool {
	return errors.Is(err, kerr.MessageTooLarge) || errors.Is(err, kerr.RecordListTooLarge)
}

// topicLimit is the largest record one producer's topic takes, and its
// producers' batch cap: the configured max_message_bytes, else the topic's
// max.message.bytes as the brokers tell it, else the brokers'
// message.max.bytes, else DefaultMaxMessageBytes. It is resolved before
// the first record goes out and asked again (fresh) after a broker's
// refusal and before a record over a limit older than limitMaxAge goes to
// the DLQ; the topic's limit, when lower, wins over a configured one.
type topicLimit struct {
	target    string // "sink <name>" or "dlq", for logs
	topic     string
	fixed     int // the configured limit; 0 asks the brokers
	warnBelow int // a sink's executor.max_output_bytes: a smaller limit is logged as WARN
	stop      context.Context
	log       *slog.Logger

	client func() *kgo.Client // the producer's current client, for the lookups
	// txnCap is the limit the exactly-once source's transactional client
	// last capped its batches to this topic at (capTxn); 0: not known.
	txnCap atomic.Int64
	// onChange renews the producers when a later lookup or a refusal
	// changes the limit (not at the first resolve: no batch was made yet).
	onChange func()
	v        atomic.Int64
	once     sync.Once
	done     chan struct{}

	// Later lookups (fresh): when the last finished one started, the
	// running one (closed when it ends), and whether the last one failed.
	mu      sync.Mutex
	looked  time.Time
	running chan struct{}
	failing bool
}

// refreshGap is the least time between the starts of two lookups of a
// topic's limit, so refusals in a burst share one (a variable for tests).
var refreshGap = time.Second

// limitMaxAge is how old a looked-up limit may be when a record over it
// is about to go to the DLQ (a variable for this package's tests).
var limitMaxAge = 30 * time.Second

func newTopicLimit(stop context.Context, target, topic string, fixed, warnBelow int, log *slog.Logger) *topicLimit {
	l := &topicLimit{target: target, topic: topic, fixed: fixed, warnBelow: warnBelow, stop: stop, log: log, done: make(chan struct{})}
	l.v.Store(DefaultMaxMessageBytes)
	if fixed > 0 {
		l.v.Store(int64(min(fixed, maxLimit)))
	}
	return l
}

// get is the limit; DefaultMaxMessageBytes until resolved.
func (l *topicLimit) get() int { return int(l.v.Load()) }

// lower lowers the limit to n when the brokers refused a record the
// limit let through (the topic takes less than the worker was told).
func (l *topicLimit) lower(n int) {
	for {
		cur := l.v.Load()
		if int64(n) >= cur || n < 1 {
			return
		}
		if l.v.CompareAndSwap(cur, int64(n)) {
			l.onChange()
			return
		}
	}
}

// capTxn is the limit as the exactly-once source's transactional client
// caps its batches at, noted (txnCap).
func (l *topicLimit) capTxn() int32 {
	n := l.get()
	l.txnCap.Store(int64(n))
	return int32(n)
}

// batchMax is the producer's kgo.ProducerBatchMaxBytesFn.
func (l *topicLimit) batchMax(string) int32 { return int32(l.get()) }

// wait resolves the limit on first use and waits for it, or for ctx.
func (l *topicLimit) wait(ctx context.Context) error {
	l.ready()
	select {
	case <-l.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ready resolves the limit on first use and reports whether it is known.
func (l *topicLimit) ready() bool {
	l.once.Do(func() { go l.resolve() })
	select {
	case <-l.done:
		return true
	default:
		return false
	}
}

func (l *topicLimit) resolve() {
	defer close(l.done)
	from := "config"
	n := l.fixed
	if n == 0 {
		start := time.Now()
		var err error
		n, from, err = l.lookup()
		l.mu.Lock()
		l.looked, l.failing = start, err != nil
		l.mu.Unlock()
		if err != nil {
			l.log.Warn("kafka_max_message_bytes_unknown", "target", l.target, "topic", l.topic, "assumed", DefaultMaxMessageBytes, "error", err.Error(),
				"detail", "the brokers did not tell the topic's max.message.bytes; the assumed limit holds until they do (asked again when a broker refuses a batch as too large), or set max_message_bytes")
			return
		}
		n = min(n, maxLimit)
		l.v.Store(int64(n))
	}
	if n < l.warnBelow {
		l.logLimit(n, "from", from, "max_output_bytes", l.warnBelow)
	} else {
		l.logLimit(n, "from", from)
	}
}

// logLimit logs the limit n the topic has now, as a WARN when the topic
// takes less than max_message_bytes or than a result near
// executor.max_output_bytes.
func (l *topicLimit) logLimit(n int, attrs ...any) {
	attrs = append([]any{"target", l.target, "topic", l.topic, "max_message_bytes", n}, attrs...)
	switch {
	case l.fixed > 0 && n < l.fixed:
		l.log.Warn("kafka_max_message_bytes", append(attrs, "configured", l.fixed,
			"detail", "the topic takes less than max_message_bytes: the topic's limit applies")...)
	case n < l.warnBelow:
		l.log.Warn("kafka_max_message_bytes", append(attrs,
			"detail", "a result near executor.max_output_bytes does not fit this topic: such results go to the DLQ; raise the topic's max.message.bytes to deliver them")...)
	default:
		l.log.Info("kafka_max_message_bytes", attrs...)
	}
}

// ceiling is the largest limit the brokers may raise it to: the
// configured max_message_bytes, if any.
func (l *topicLimit) ceiling() int {
	if l.fixed > 0 {
		return min(l.fixed, maxLimit)
	}
	return maxLimit
}

// overLimit reports whether a record of size is over the limit, looked up
// again first when older than limitMaxAge (and the record is within the
// configured max_message_bytes). limit is the one it was judged against.
func (l *topicLimit) overLimit(ctx context.Context, size int) (over bool, limit int, err error) {
	limit = l.get()
	if size <= limit || size > l.ceiling() {
		return size > limit, limit, nil
	}
	limit, err = l.fresh(ctx, time.Now().Add(-limitMaxAge))
	return size > limit, limit, err
}

// fresh is the limit as told by a lookup started at since or later: the
// last one, the running one, or a new one, started refreshGap after the
// last at the earliest. err is ctx's, when it ended first.
func (l *topicLimit) fresh(ctx context.Context, since time.Time) (int, error) {
	for {
		l.mu.Lock()
		if !l.looked.Before(since) {
			l.mu.Unlock()
			return l.get(), nil
		}
		ch := l.running
		if ch == nil {
			start := time.Now()
			for _, t := range []time.Time{l.looked.Add(refreshGap), since} {
				if t.After(start) {
					start = t
				}
			}
			ch = make(chan struct{})
			l.running = ch
			go l.refresh(start, ch)
		}
		// A running lookup older than since is waited for, then a newer
		// one started.
		l.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return l.get(), ctx.Err()
		}
	}
}

// refresh is one later lookup, started at start; it closes ch when done.
// The first failure of a run of them is logged.
func (l *topicLimit) refresh(start time.Time, ch chan struct{}) {
	t := time.NewTimer(time.Until(start))
	select {
	case <-t.C:
	case <-l.stop.Done(): // the sinks close: no lookup; waiters see the limit as it is
		t.Stop()
	}
	var (
		n    int
		from string
		err  = l.stop.Err()
	)
	if err == nil {
		start = time.Now()
		n, from, err = l.lookup()
	}
	var prev int64
	if err == nil {
		n = min(n, l.ceiling())
		if prev = l.v.Swap(int64(n)); int(prev) != n {
			l.onChange() // before anyone sees this lookup done: they produce on the renewed clients
		}
	}
	l.mu.Lock()
	l.looked, l.running = start, nil
	failedFirst := err != nil && !l.failing && l.stop.Err() == nil
	l.failing = err != nil
	l.mu.Unlock()
	close(ch)
	switch {
	case failedFirst:
		l.log.Warn("kafka_max_message_bytes_refresh_failed", "target", l.target, "topic", l.topic, "max_message_bytes", l.get(), "error", err.Error(),
			"detail", "the brokers did not tell the topic's max.message.bytes again: the limit stays; a record a broker refuses even alone goes to the DLQ")
	case err == nil && int(prev) != n:
		l.logLimit(n, "from", from, "previous", prev)
	}
}

// lookup asks the brokers for the topic's max.message.bytes (its own or
// the brokers' default), then, if the topic's configs cannot be
// described, for a broker's message.max.bytes. from says which.
func (l *topicLimit) lookup() (n int, from string, err error) {
	ctx, cancel := context.WithTimeout(l.stop, lookupTimeout)
	defer cancel()
	adm := kadm.NewClient(l.client())
	rcs, err := adm.DescribeTopicConfigs(ctx, l.topic)
	if n, err = configInt(rcs, err, l.topic, "max.message.bytes"); err == nil {
		return n, "topic", nil
	}
	topicErr := fmt.Errorf("topic %s: %w", l.topic, err)
	brokers, err := adm.ListBrokers(ctx)
	if err == nil && len(brokers) == 0 {
		err = errors.New("no broker listed")
	}
	if err == nil {
		rcs, err = adm.DescribeBrokerConfigs(ctx, brokers[0].NodeID)
		if n, err = configInt(rcs, err, strconv.Itoa(int(brokers[0].NodeID)), "message.max.bytes"); err == nil {
			return n, "broker", nil
		}
	}
	return 0, "", errors.Join(topicErr, fmt.Errorf("broker: %w", err))
}

// configInt is the positive integer value of config key of resource name
// in a describe's answer (rcs, err).
func configInt(rcs kadm.ResourceConfigs, err error, name, key string) (int, error) {
	if err != nil {
		return 0, err
	}
	rc, err := rcs.On(name, nil)
	if err == nil {
		err = rc.Err
	}
	if err != nil {
		return 0, err
	}
	for _, c := range rc.Configs {
		if c.Key == key {
			n, err := strconv.Atoi(c.MaybeValue())
			if err != nil || n <= 0 {
				return 0, fmt.Errorf("%s = %q is not a positive integer", key, c.MaybeValue())
			}
			return n, nil
		}
	}
	return 0, fmt.Errorf("no %s in the answer", key)
}
