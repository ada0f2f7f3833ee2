// Package kafkaread is the operator's read-only view of Kafka: topic
// aliases, one record by coordinates, records by time window. Every call
// builds its own client that joins no group, commits nothing, reads at the
// call's Isolation and is closed before the call returns.
package kafkaread

import (
	"fmt"
	"time"

	"svc/worker/kconn"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ReaderClientID is the client id of every read client (no group joined).
const ReaderClientID = "svc-ui-read"

// DefaultDeadline bounds a single-message read, a stream's setup and each
// wait for more stream records.
const DefaultDeadline = 10 * time.Second

// Reader serves reads for a fixed set of aliases; safe for concurrent use.
type Reader struct {
	aliases   []AliasSpec
	byName    map[string]int
	opts      map[string][]kgo.Opt // per available alias, from kconn.Opts
	deadline  time.Duration
	onMerger  func(*merger) // test hook: the merger of each stream
	extraOpts []kgo.Opt     // test hook: options of every client
}

// ReadAheadBytes is what one stream may hold, over all its partitions: a
// quarter for the one fetch in flight or buffered (decompressed), the rest
// for the records the merge queues (records that do not fit are queued as
// stand-ins and read again in their turn). A batch larger than fetchBudget
// decompressed is read a record at a time (merger.readStreamed).
const ReadAheadBytes = 1 << 20

// MaxReadBatchBytes is the most one batch may decompress to for any read;
// a larger batch fails with a *BatchTooLargeError.
const MaxReadBatchBytes = 16 << 20

const (
	fetchBudget = ReadAheadBytes / 4           // decompressed bytes of the fetch in flight or buffered
	queueBudget = ReadAheadBytes - fetchBudget // bytes of the records the merge queues
)

// Option configures a Reader.
type Option func(*Reader)

// WithDeadline replaces DefaultDeadline; tests use a short one.
func WithDeadline(d time.Duration) Option { return func(r *Reader) { r.deadline = d } }

// New validates aliases and returns a Reader.
func New(aliases []AliasSpec, options ...Option) (*Reader, error) {
	r := &Reader{
		aliases:  aliases,
		byName:   make(map[string]int, len(aliases)),
		opts:     make(map[string][]kgo.Opt, len(aliases)),
		deadline: DefaultDeadline,
	}
	for _, o := range options {
		o(r)
	}
	if r.deadline <= 0 {
		return nil, fmt.Errorf("new reader: deadline %v is not positive", r.deadline)
	}
	for i, a := range aliases {
		if a.Name == "" {
			return nil, fmt.Errorf("new reader: alias %d has no name", i)
		}
		if _, dup := r.byName[a.Name]; dup {
			return nil, fmt.Errorf("new reader: duplicate alias '%s'", a.Name)
		}
		r.byName[a.Name] = i
		if a.Unavailable != "" {
			continue
		}
		if a.Topic == "" {
			return nil, fmt.Errorf("new reader: alias '%s' has no topic", a.Name)
		}
		opts, err := kconn.Opts(a.Conn)
		if err != nil {
			return nil, fmt.Errorf("new reader: alias '%s': %w", a.Name, err)
		}
		r.opts[a.Name] = opts
	}
	return r, nil
}

// TopicInfo is one readable alias as listed by GET /api/v1/debug/kafka/topics.
type TopicInfo struct {
	Alias string `json:"alias"`
	Kind  string `json:"kind"`
}

// Topics lists the available aliases in configuration order; never nil.
func (r *Reader) Topics() []TopicInfo {
	out := make([]TopicInfo, 0, len(r.aliases))
	for _, a := range r.aliases {
		if a.Unavailable == "" {
			out = append(out, TopicInfo{Alias: a.Name, Kind: a.Kind})
		}
	}
	return out
}

// resolve finds an available alias.
func (r *Reader) resolve(alias string) (AliasSpec, error) {
	i, ok := r.byName[alias]
	if !ok {
		return AliasSpec{}, fmt.Errorf("alias '%s': %w", alias, ErrUnknownAlias)
	}
	a := r.aliases[i]
	if a.Unavailable != "" {
		return AliasSpec{}, &UnavailableError{Alias: alias, Detail: a.Unavailable}
	}
	return a, nil
}

// newClient builds a group-less read client for a that fetches at iso;
// nothing is consumed until AddConsumePartitions. extra options go last.
func (r *Reader) newClient(a AliasSpec, iso Isolation, extra ...kgo.Opt) (*kgo.Client, *kadm.Client, error) {
	// A request's ctx does not bound connection setup: the dial timeout
	// and request timeout overhead do, so both are capped by the deadline.
	bound := r.deadline
	if d, ok := kconn.RequestTimeout(a.Conn.ClientConfig); ok && d < bound {
		bound = d
	}
	opts := make([]kgo.Opt, 0, len(r.opts[a.Name])+9+len(extra))
	opts = append(opts,
		kgo.FetchMaxWait(500*time.Millisecond), // overridable by fetch.max.wait.ms
		kgo.KeepControlRecords(),               // so a partition ending in a txn marker is seen to end
	)
	opts = append(opts, r.opts[a.Name]...)
	// Read-ahead is bounded whatever client_config says: one fetch at a
	// time of at most fetchMax bytes (a stream's fetchSizer shrinks it).
	fetchBytes := fetchMax(a)
	opts = append(opts,
		kgo.MaxConcurrentFetches(1),
		kgo.FetchMaxBytes(fetchBytes),
		kgo.FetchMaxPartitionBytes(fetchBytes),
		kgo.DialTimeout(bound),
		kgo.RequestTimeoutOverhead(max(bound, 100*time.Millisecond)),
		kgo.ClientID(ReaderClientID),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	)
	opts = append(opts, iso.fetchOpts()...)
	// A fetch decompresses at most fetchBudget beyond its first batch (the
	// rest is fetched again later); a batch larger than that is refused
	// (kconn.ErrLargeBatch) and read as a stream by the read itself.
	opts = append(opts, kconn.NewDecompressor(MaxReadBatchBytes, fetchBudget).StreamAbove(fetchBudget).Opts()...)
	opts = append(opts, extra...)
	opts = append(opts, r.extraOpts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, nil, &brokerError{op: "connect", alias: a.Name, kind: ErrBrokerFailure, cause: err}
	}
	return cl, kadm.NewClient(cl), nil
}

// fetchMax is the most one fetch asks for: fetchBudget or fetch.max.bytes.
func fetchMax(a AliasSpec) int32 {
	if v, ok := kconn.Int(a.Conn.ClientConfig, "fetch.max.bytes"); ok && v < fetchBudget {
		return int32(v)
	}
	return fetchBudget
}
