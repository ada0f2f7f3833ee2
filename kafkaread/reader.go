// Package kafkaread is the operator's read-only view of Kafka: it resolves
// topic aliases (source, dlq, sink names) to topics and clusters, fetches
// one record by coordinates and streams records by time window. It knows
// nothing of HTTP; httpd maps its errors (ErrNotFound, ErrBadQuery,
// ErrBrokerTimeout, ErrBrokerFailure) to status codes.
//
// Reads are invisible to the pipeline. Every call builds its own short-lived
// franz-go client with client id svc-ui-read (the spec's reader group.id),
// consumes assigned partitions directly (kgo.ConsumePartitions semantics,
// never kgo.ConsumerGroup), so it joins no group and commits no offsets, and
// closes the client before returning, including when ctx is canceled.
// Each read also chooses its Isolation (read_uncommitted by default), so
// what one read asked for never reaches another.
//
// Connections are built by the kconn subpackage, shared with the worker's
// consumer and sinks; keys, payloads and header values are shown by the
// payload subpackage's UTF-8-or-base64 rule, shared with every other JSON
// surface.
package kafkaread

import (
	"fmt"
	"time"

	"svc/worker/kconn"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ReaderClientID is the client id of every read client; it is the spec's
// reader group.id, used only as an identity because no group is joined.
const ReaderClientID = "svc-ui-read"

// DefaultDeadline bounds broker calls: the whole single-message
// read, a stream's setup, and each wait for more stream records.
const DefaultDeadline = 10 * time.Second

// Reader serves reads for a fixed set of aliases. It holds no connection and
// no goroutine between calls; its methods are safe for concurrent use.
type Reader struct {
	aliases   []AliasSpec
	byName    map[string]int
	opts      map[string][]kgo.Opt // per available alias, from kconn.Opts
	deadline  time.Duration
	onMerger  func(*merger) // test hook: the merger of each stream
	extraOpts []kgo.Opt     // test hook: options of every client
}

// ReadAheadBytes is what one stream may hold for a client that reads
// slowly, over all its partitions together: a quarter for the one fetch
// the client has in flight or buffered (counted decompressed: see
// fetchSizer and kconn.Decompressor, which decompresses at most twice
// that a fetch), the rest for the records the merge queues (copies,
// counted exactly; the records that do not fit are queued as stand-ins
// and read again in their turn). A batch that decompresses to more than
// fetchBudget is never decompressed whole: its partition is read as a
// stream (merger.readStreamed), a record at a time.
const ReadAheadBytes = 1 << 20

// MaxReadBatchBytes is the most one batch may decompress to for a read
// (the read API, DLQ pages and redrive), even as a stream. A read of a
// larger batch fails with a *BatchTooLargeError naming its offsets.
const MaxReadBatchBytes = 16 << 20

const (
	fetchBudget = ReadAheadBytes / 4           // decompressed bytes of the fetch in flight or buffered
	queueBudget = ReadAheadBytes - fetchBudget // bytes of the records the merge queues
)

// Option configures a Reader.
type Option func(*Reader)

// WithDeadline replaces DefaultDeadline; tests use a short one.
func WithDeadline(d time.Duration) Option { return func(r *Reader) { r.deadline = d } }

// New validates aliases (unique names, a usable Conn for every available
// alias) and returns a Reader. It starts nothing.
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

// newClient builds a direct (group-less) read client for a that fetches
// at iso. Consumption starts only when partitions are added with
// AddConsumePartitions. extra options go last.
func (r *Reader) newClient(a AliasSpec, iso Isolation, extra ...kgo.Opt) (*kgo.Client, *kadm.Client, error) {
	// kgo does not apply a request's ctx while it sets up a connection
	// (dial, ApiVersions, SASL): only the dial timeout and the request
	// timeout overhead bound that, so both are capped by the deadline.
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
	// time, in flight or buffered, of at most fetchBudget bytes (less when
	// fetch.max.bytes says so); a stream shrinks it further by the
	// compression it sees (fetchSizer).
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
	// Whatever the codec, a fetch decompresses batches of at most
	// fetchBudget, and at most fetchBudget beyond its first: a batch past
	// that is fetched again, first of a later fetch, never decompressed
	// twice, and a larger one is refused (kconn.ErrLargeBatch) and read
	// as a stream by the read itself (kconn.Decompressor).
	opts = append(opts, kconn.NewDecompressor(MaxReadBatchBytes, fetchBudget).StreamAbove(fetchBudget).Opts()...)
	opts = append(opts, extra...)
	opts = append(opts, r.extraOpts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, nil, &brokerError{op: "connect", alias: a.Name, kind: ErrBrokerFailure, cause: err}
	}
	return cl, kadm.NewClient(cl), nil
}

// fetchMax is the most one fetch of a's client asks for: fetchBudget, or
// fetch.max.bytes when that is smaller.
func fetchMax(a AliasSpec) int32 {
	if v, ok := kconn.Int(a.Conn.ClientConfig, "fetch.max.bytes"); ok && v < fetchBudget {
		return int32(v)
	}
	return fetchBudget
}
