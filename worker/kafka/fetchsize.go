package kafka

import (
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fetchSizer bounds what one fetch response holds once decompressed
// (docs/operations.md "Kafka consumer memory"): Kafka bounds a fetch by
// its bytes on the wire, and compressed batches inflate (one default fetch
// held a 20,000-record backlog whole). It watches every batch the client
// decompresses and asks the next fetches for fetch_buffer_bytes over how
// much the batches inflated, overhead included: the first ask is small
// (minFetchAsk), a rise is followed at once, a fall gradually.
//
// What the client holds fetched and not yet polled is read from the
// client's own counters, which a poll lowers as it takes records. The
// client's unbuffered-record hooks would lag: they run once the poll
// returns, and the broker's next fetch may be buffered before that.
type fetchSizer struct {
	budget  int64 // inflated bytes one fetch may hold
	ceiling int32 // the wire size never asked above (client_config fetch.max.bytes, else budget up to 100 MiB)

	mu    sync.Mutex
	cl    *kgo.Client
	ratio float64 // inflated bytes per wire byte, smoothed; 0 before the first batch
	ask   atomic.Int32

	// What each broker's latest fetch response holds (its batches'
	// records decompressed, with their overhead), and the most one
	// response held: the bound the decompressor keeps, measured on the
	// client's batch metrics.
	response map[int32]int64 // broker → bytes of its latest response's batches
	peak     atomic.Int64

	tooLarge prometheus.Counter // batches refused over MaxBatchBytes
}

// recordOverhead is what a record costs in memory beyond its key, value
// and header bytes: the client's kgo.Record, the source's message and its
// queue entry.
const recordOverhead = 256

// minFetchAsk is the smallest wire size asked, and the first: below it a
// fetch of small records costs more in round trips than it saves.
const minFetchAsk = 16 << 10

// maxDefaultRead is the client library's default BrokerMaxReadBytes.
const maxDefaultRead = 100 << 20

func newFetchSizer(budget int64, clientConfig map[string]string, reg prometheus.Registerer) *fetchSizer {
	// The client reads at most 100 MiB a response unless fetch.max.bytes
	// raised that (kconn).
	ceiling := int32(min(budget, maxDefaultRead))
	if v, err := strconv.ParseInt(strings.TrimSpace(clientConfig["fetch.max.bytes"]), 10, 32); err == nil && v > 0 {
		ceiling = int32(v)
	}
	f := &fetchSizer{budget: budget, ceiling: ceiling, response: map[int32]int64{}, tooLarge: prometheus.NewCounter(prometheus.CounterOpts{
		Name: "svc_kafka_batches_too_large_total",
		Help: "Batches of the source topic refused because they decompress to more than 64 MiB; each stalls its partition until a restart or a reassignment (log kafka_batch_too_large).",
	})}
	f.ask.Store(min(minFetchAsk, ceiling))
	reg.MustRegister(f.tooLarge,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "svc_kafka_fetch_buffered_bytes",
			Help: "Bytes of records the consumer fetched and has not polled yet (decompressed, with their in-memory overhead); about sources.kafka.fetch_buffer_bytes per broker at most.",
		}, f.buffered),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "svc_kafka_fetch_request_bytes",
			Help: "Bytes on the wire the consumer's next fetch asks for: sources.kafka.fetch_buffer_bytes over the inflation of the batches read.",
		}, func() float64 { return float64(f.ask.Load()) }),
	)
	return f
}

// askFor is the wire size that inflates to the budget at ratio.
func (f *fetchSizer) askFor(ratio float64) int32 {
	a := float64(f.budget) / ratio
	return int32(max(float64(min(minFetchAsk, f.ceiling)), min(a, float64(f.ceiling))))
}

// opts are the client options: the first fetch size and the hooks.
func (f *fetchSizer) opts() []kgo.Opt {
	a := f.ask.Load()
	return []kgo.Opt{kgo.FetchMaxBytes(a), kgo.FetchMaxPartitionBytes(a), kgo.WithHooks(f)}
}

// attach sets the client whose fetch size the sizer updates.
func (f *fetchSizer) attach(cl *kgo.Client) {
	f.mu.Lock()
	f.cl = cl
	f.mu.Unlock()
}

// buffered is what the client holds fetched and not yet polled:
// decompressed, with the records' overhead.
func (f *fetchSizer) buffered() float64 {
	f.mu.Lock()
	cl := f.cl
	f.mu.Unlock()
	if cl == nil {
		return 0
	}
	return float64(cl.BufferedFetchBytes() + cl.BufferedFetchRecords()*recordOverhead)
}

// OnBrokerRead implements kgo.HookBrokerRead: a broker's fetch response
// is read whole before its batches are decoded, and the broker is sent
// no other fetch before every record of this one is polled.
func (f *fetchSizer) OnBrokerRead(meta kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if key != int16(kmsg.Fetch) || err != nil {
		return
	}
	f.mu.Lock()
	f.response[meta.NodeID] = 0
	f.mu.Unlock()
}

// OnFetchBatchRead implements kgo.HookFetchBatchRead.
func (f *fetchSizer) OnFetchBatchRead(meta kgo.BrokerMetadata, _ string, _ int32, m kgo.FetchBatchMetrics) {
	inflated := m.UncompressedBytes + m.NumRecords*recordOverhead
	f.mu.Lock()
	defer f.mu.Unlock()
	n := f.response[meta.NodeID] + int64(inflated)
	f.response[meta.NodeID] = n
	if n > f.peak.Load() {
		f.peak.Store(n)
	}
	if m.CompressedBytes <= 0 {
		return
	}
	r := max(1, float64(inflated)/float64(m.CompressedBytes))
	if r >= f.ratio {
		f.ratio = r
	} else {
		f.ratio = 0.9*f.ratio + 0.1*r
	}
	ask, cur := f.askFor(f.ratio), f.ask.Load()
	// Updated only for a smaller size or a clearly larger one.
	if ask < cur || ask > cur+cur/8 {
		f.ask.Store(ask)
		if f.cl != nil {
			f.cl.UpdateFetchMaxBytes(ask, ask)
		}
	}
}

// recordSize is what a fetched record holds in memory.
func recordSize(r *kgo.Record) int64 {
	n := len(r.Key) + len(r.Value) + recordOverhead
	for _, h := range r.Headers {
		n += len(h.Key) + len(h.Value)
	}
	return int64(n)
}
