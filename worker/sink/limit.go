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

// DefaultMaxMessageBytes is the limit a sink or the DLQ assumes when the
// brokers do not tell its topic's max.message.bytes: Kafka's own default
// (message.max.bytes).
const DefaultMaxMessageBytes = 1048588

// maxLimit caps any limit: the producer refuses larger requests
// (config.MaxMessageBytesMax, less the request's own framing).
const maxLimit = config.MaxMessageBytesMax - 1024

// lookupTimeout bounds the brokers' answer about a topic's limit.
const lookupTimeout = 10 * time.Second

// recordOverhead is what a record costs beyond its own encoding when it is
// the only record of its batch, as the producer counts it until it knows
// the broker's version: the batch header (61 bytes, all the broker
// counts) and the request's 4-byte length of the batch (1 byte once the
// version is known).
const recordOverhead = 61 + 4

// RecordSize is the size rec takes against a topic's max.message.bytes
// when it travels alone, uncompressed: its key, value and headers, their
// lengths and the batch framing, at most 4 bytes more than the broker
// counts. The producer refuses a record larger than its batch cap before
// sending it, whatever the codec; one of at most RecordSize it takes.
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

// topicLimit is the largest record one producer's topic takes. It is
// resolved once, before the first record goes out: the configured
// max_message_bytes, else the topic's max.message.bytes as the brokers
// tell it, else the brokers' message.max.bytes, else
// DefaultMaxMessageBytes (logged). The producer's batch cap reads it too,
// so a batch never outgrows what the broker takes.
type topicLimit struct {
	target    string // "sink <name>" or "dlq", for logs
	topic     string
	fixed     int // the configured limit; 0 asks the brokers
	warnBelow int // a sink's executor.max_output_bytes: a smaller limit is logged as WARN
	stop      context.Context
	log       *slog.Logger

	cl   *kgo.Client // set once the producer exists
	v    atomic.Int64
	once sync.Once
	done chan struct{}
}

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
		if int64(n) >= cur || n < 1 || l.v.CompareAndSwap(cur, int64(n)) {
			return
		}
	}
}

// batchMax is the producer's kgo.ProducerBatchMaxBytesFn.
func (l *topicLimit) batchMax(string) int32 { return int32(l.get()) }

// wait resolves the limit on first use and waits for it, or for ctx.
func (l *topicLimit) wait(ctx context.Context) error {
	l.once.Do(func() { go l.resolve() })
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
		ctx, cancel := context.WithTimeout(l.stop, lookupTimeout)
		var err error
		n, from, err = lookupMaxMessageBytes(ctx, l.cl, l.topic)
		cancel()
		if err != nil {
			l.log.Warn("kafka_max_message_bytes_unknown", "target", l.target, "topic", l.topic, "assumed", DefaultMaxMessageBytes, "error", err.Error(),
				"detail", "the brokers did not tell the topic's max.message.bytes; larger records are refused until restart (or set max_message_bytes)")
			return
		}
		n = min(n, maxLimit)
		l.v.Store(int64(n))
	}
	attrs := []any{"target", l.target, "topic", l.topic, "max_message_bytes", n, "from", from}
	if n < l.warnBelow {
		l.log.Warn("kafka_max_message_bytes", append(attrs, "max_output_bytes", l.warnBelow,
			"detail", "a result near executor.max_output_bytes does not fit this topic: such results go to the DLQ; raise the topic's max.message.bytes to deliver them")...)
		return
	}
	l.log.Info("kafka_max_message_bytes", attrs...)
}

// lookupMaxMessageBytes asks the brokers for topic's max.message.bytes
// (its own or the brokers' default), then, if the topic's configs cannot
// be described, for a broker's message.max.bytes. from says which.
func lookupMaxMessageBytes(ctx context.Context, cl *kgo.Client, topic string) (n int, from string, err error) {
	adm := kadm.NewClient(cl)
	rcs, err := adm.DescribeTopicConfigs(ctx, topic)
	if err == nil {
		var rc kadm.ResourceConfig
		if rc, err = rcs.On(topic, nil); err == nil {
			if err = rc.Err; err == nil {
				if n, err = configInt(rc.Configs, "max.message.bytes"); err == nil {
					return n, "topic", nil
				}
			}
		}
	}
	topicErr := fmt.Errorf("topic %s: %w", topic, err)
	brokers, err := adm.ListBrokers(ctx)
	if err == nil && len(brokers) == 0 {
		err = errors.New("no broker listed")
	}
	if err == nil {
		rcs, err = adm.DescribeBrokerConfigs(ctx, brokers[0].NodeID)
		if err == nil {
			var rc kadm.ResourceConfig
			if rc, err = rcs.On(strconv.Itoa(int(brokers[0].NodeID)), nil); err == nil {
				if err = rc.Err; err == nil {
					if n, err = configInt(rc.Configs, "message.max.bytes"); err == nil {
						return n, "broker", nil
					}
				}
			}
		}
	}
	return 0, "", errors.Join(topicErr, fmt.Errorf("broker: %w", err))
}

// configInt is the positive integer value of config key in cs.
func configInt(cs []kadm.Config, key string) (int, error) {
	for _, c := range cs {
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
