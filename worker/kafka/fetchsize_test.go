package kafka

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestKafkaFetchBufferBounded consumes a backlog of highly compressible
// 1 KiB records (snappy batches that inflate about 15×), many times
// sources.kafka.fetch_buffer_bytes once decompressed, and checks that no
// fetch response held more than the budget plus one producer batch once
// its batches were decoded (records and their overhead), however far behind the consumer was. Before
// the fetch sizer, one fetch (1 MiB a partition on the wire) held the
// whole backlog. The backlog starts with uncompressed records, so the
// sizer's ask runs ahead (it sizes the fetch for batches that inflate
// 1.25×) and the first fetch of compressed batches asks 12× too much: the
// decompressor's window, counting the records' overhead and the
// uncompressed batches as the sizer does, is what holds the bound there.
// Everything is still consumed and committed.
func TestKafkaFetchBufferBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("it needs a backlog many times the fetch budget (thousands of records): runs in the full suite")
	}
	t.Parallel()
	const (
		n        = 20_000
		plain    = 300 // uncompressed records first
		budget   = 1 << 20
		batchMax = 64 << 10 // producer batches, counted before compression
	)
	c := ktCluster(t, 3)
	addrs := c.ListenAddrs()
	record := func(i int) *kgo.Record {
		v := fmt.Sprintf("id=%d key=k%d ", i, i%100)
		v += strings.Repeat("x", 1024-len(v))
		return &kgo.Record{Topic: ktIn, Key: fmt.Appendf(nil, "k%d", i%100), Value: []byte(v)}
	}
	recs := make([]*kgo.Record, 0, n)
	for i := range plain {
		recs = append(recs, record(i))
	}
	ktProduce(t, ktClient(t, addrs, kgo.ProducerBatchMaxBytes(batchMax), kgo.ProducerBatchCompression(kgo.NoCompression())), recs)
	recs = recs[:0]
	var inflated int64
	for i := plain; i < n; i++ {
		recs = append(recs, record(i))
		inflated += recordSize(recs[len(recs)-1])
	}
	ktProduce(t, ktClient(t, addrs, kgo.ProducerBatchMaxBytes(batchMax), kgo.ProducerBatchCompression(kgo.SnappyCompression())), recs)
	if inflated < 8*budget {
		t.Fatalf("backlog of %d bytes: want many times the budget %d", inflated, budget)
	}

	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cfg := ktConfig(t, addrs, self)
	cfg.Executor.Args, cfg.Executor.Mode = []string{"exec-demo"}, "persistent"
	cfg.Sources.Kafka.FetchBufferBytes = budget
	cfg.Sources.Kafka.MaxPollRecords = 500
	w := ktStart(t, cfg)
	adm := ktAdmin(t, addrs)
	ktWaitCommitted(t, adm, cfg.Sources.Kafka.Group)
	if got := ktSum(ktCommitted(t, adm, cfg.Sources.Kafka.Group)); got != int64(n) {
		t.Fatalf("committed %d offsets, want %d", got, n)
	}
	if polled := w.Metric("svc_kafka_records_polled_total"); polled < float64(n) {
		t.Fatalf("%v records polled, want %d", polled, n)
	}
	// One producer batch inflated: its records and their overhead.
	batch := int64(batchMax/1024+1) * (1024 + recordOverhead + 8)
	peak := w.Src.sizer.peak.Load()
	if peak > budget+batch {
		t.Errorf("a fetch response held %d bytes of records at most, want at most %d (fetch_buffer_bytes %d + one batch %d); the backlog was %d",
			peak, budget+batch, budget, batch, inflated)
	}
	if peak == 0 {
		t.Error("no fetched record was counted")
	}
	if buffered := w.Metric("svc_kafka_fetch_buffered_bytes"); buffered < 0 || buffered > float64(budget+batch) {
		t.Errorf("svc_kafka_fetch_buffered_bytes = %v after the backlog", buffered)
	}
	ask := w.Src.sizer.ask.Load()
	if ask >= budget/4 {
		t.Errorf("the fetch asks for %d bytes on the wire, want less than a quarter of the budget %d for batches that inflate over 10×", ask, budget)
	}
	if w.Src.dec.Load().Deferred() == 0 {
		t.Error("no batch was deferred: the first fetch of compressed batches did not outrun the window")
	}
	t.Logf("backlog %d bytes inflated, a response held %d at most, fetch ask %d, %d batches deferred", inflated, peak, ask, w.Src.dec.Load().Deferred())
}

// TestFetchSizerAsks checks the sizes the sizer asks for: 16 KiB first,
// then the budget over the inflation of the batches read (a rise followed
// at once, a fall gradually), never above client_config fetch.max.bytes
// nor, without it, above the 100 MiB the client reads a response.
func TestFetchSizerAsks(t *testing.T) {
	t.Parallel()
	batch := func(f *fetchSizer, records, uncompressed, compressed int) int32 {
		f.OnFetchBatchRead(kgo.BrokerMetadata{}, ktIn, 0, kgo.FetchBatchMetrics{NumRecords: records, UncompressedBytes: uncompressed, CompressedBytes: compressed})
		ask := f.ask.Load()
		return ask
	}
	budget := float64(2 << 20)
	f := newFetchSizer(2<<20, nil, prometheus.NewRegistry())
	if ask := f.ask.Load(); ask != minFetchAsk {
		t.Fatalf("first ask %d, want %d", ask, minFetchAsk)
	}
	// 100 records of 1 KiB in 10 KiB on the wire: (100 KiB + 100 × 256) / 10 KiB = 12.5×.
	if got, want := batch(f, 100, 100<<10, 10<<10), int32(budget/12.5); got != want {
		t.Errorf("ask after a 12.5× batch = %d, want %d", got, want)
	}
	// Uncompressed batches: the ask grows back gradually, never past the
	// budget (it is updated in steps of an eighth).
	prev := int32(0)
	for range 200 {
		got := batch(f, 100, 100<<10, 100<<10+100*recordOverhead)
		if got < prev {
			t.Fatalf("ask fell from %d to %d on batches that inflate less", prev, got)
		}
		prev = got
	}
	if prev > 2<<20 || prev < 2<<20-(2<<20)/8 {
		t.Errorf("ask after uncompressed batches = %d, want within an eighth below the budget %d", prev, 2<<20)
	}
	// A jump in the inflation is followed at once.
	if got, want := batch(f, 1000, 1000<<10, 20<<10), int32(budget/(float64(1000<<10+1000*recordOverhead)/float64(20<<10))); got != want {
		t.Errorf("ask after a 62.5× batch = %d, want %d", got, want)
	}

	capped := newFetchSizer(64<<20, map[string]string{"fetch.max.bytes": "1048576"}, prometheus.NewRegistry())
	if got := batch(capped, 10, 10<<20, 10<<20); got != 1<<20 {
		t.Errorf("ask with fetch.max.bytes 1 MiB = %d, want 1048576", got)
	}
	big := newFetchSizer(1<<30, nil, prometheus.NewRegistry())
	if got := batch(big, 10, 10<<20, 10<<20); got != maxDefaultRead {
		t.Errorf("ask with a 1 GiB budget = %d, want the client's read limit %d", got, maxDefaultRead)
	}
}
