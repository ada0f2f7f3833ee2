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
// sources.kafka.fetch_buffer_bytes once decompressed, and checks that
// what the consumer held fetched and not yet polled never went over the
// budget plus one producer batch, however far behind it was. Before the
// fetch sizer, one fetch (1 MiB a partition on the wire) held the whole
// backlog. The sizer's ask keeps a fetch near the budget; the bound is
// held by the decompressor's window, which counts the records' overhead
// as the sizer does (without it, a fetch after batches that inflated less
// held 1,240,565 bytes under load). Everything is still consumed and
// committed.
func TestKafkaFetchBufferBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("it needs a backlog many times the fetch budget (thousands of records): runs in the full suite")
	}
	t.Parallel()
	n := 20_000
	if testing.Short() {
		n = 8000
	}
	const (
		budget   = 1 << 20
		batchMax = 64 << 10 // producer batches, counted before compression
	)
	c := ktCluster(t, 3)
	addrs := c.ListenAddrs()
	cl := ktClient(t, addrs, kgo.ProducerBatchMaxBytes(batchMax), kgo.ProducerBatchCompression(kgo.SnappyCompression()))
	recs := make([]*kgo.Record, n)
	var inflated int64
	for i := range recs {
		v := fmt.Sprintf("id=%d key=k%d ", i, i%100)
		v += strings.Repeat("x", 1024-len(v))
		recs[i] = &kgo.Record{Topic: ktIn, Key: fmt.Appendf(nil, "k%d", i%100), Value: []byte(v)}
		inflated += recordSize(recs[i])
	}
	ktProduce(t, cl, recs)
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
		t.Errorf("the consumer held %d bytes of fetched records at most, want at most %d (fetch_buffer_bytes %d + one batch %d); the backlog was %d",
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
	t.Logf("backlog %d bytes inflated, peak held %d, fetch ask %d", inflated, peak, ask)
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
