package kafka

import (
	"strconv"
	"sync"
	"testing"
	"time"

	"svc/worker/workertest"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestKafkaBackpressureKeepsFetchedData saturates a small pipeline
// (max_in_flight 4) on a backlog and watches the consumer's fetch
// requests on the broker. Slots free up and fill again with every
// message; if that made the consumer drop what it had fetched and fetch
// it again, the worker would spend its CPU decoding the same batches over
// and over. Only a partition with a full queue of waiting work is paused
// on its own (its buffered rest is fetched again after the resume), and
// the queue holds hundreds of messages: at most one fetch more per half
// queue processed.
func TestKafkaBackpressureKeepsFetchedData(t *testing.T) {
	t.Parallel()
	// A partition holds 1.5 times its waiting cap (2 × poll); -short: a
	// third of the backlog behind a third of the poll size (every message
	// is a spawn).
	const parts = 2
	n, poll := 600, 100
	if testing.Short() {
		n, poll = 200, 32
	}
	c := ktCluster(t, parts)
	addrs := c.ListenAddrs()
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, ktMsg(i, "", false))
	}
	ktProduce(t, ktClient(t, addrs), recs)
	adm := ktAdmin(t, addrs)
	ends := ktEnds(t, adm, ktIn)

	// The whole backlog of a partition fits in one fetch response, so a
	// consumer that keeps what it fetched asks for data below the high
	// watermark once per partition.
	var mu sync.Mutex
	below := map[int32][]int64{}
	c.ControlKey(int16(kmsg.Fetch), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		req := kr.(*kmsg.FetchRequest)
		mu.Lock()
		defer mu.Unlock()
		for _, tp := range req.Topics {
			for _, p := range tp.Partitions {
				if p.FetchOffset < ends[p.Partition] {
					below[p.Partition] = append(below[p.Partition], p.FetchOffset)
				}
			}
		}
		return nil, nil, false // observe only
	})

	cfg := ktConfig(t, addrs, workertest.EchoScript(t))
	cfg.Pipeline.MaxInFlight = 4
	cfg.Executor.PoolSize = 2
	cfg.Sources.Kafka.MaxPollRecords = poll
	w := ktStart(t, cfg)
	ktWaitCommitted(t, adm, cfg.Sources.Kafka.Group)
	if on := w.Metric("svc_kafka_records_polled_total"); on < float64(n) {
		t.Fatalf("%v records polled, want %d", on, n)
	}
	mu.Lock()
	defer mu.Unlock()
	half := int64(w.Src.lim.partWait / 2)
	for p, offs := range below {
		if allowed := 1 + (ends[p]+half-1)/half; int64(len(offs)) > allowed {
			t.Errorf("partition %d (%d records) was fetched below its high watermark %d times, at offsets %v; want at most %d (one per %d messages): fetched data is dropped and fetched again",
				p, ends[p], len(offs), offs[:min(len(offs), 20)], allowed, half)
		}
	}
}

// TestKafkaBackpressureQuietPoll fills a pipeline behind a closed gate
// until backpressure holds, then lets the backlog run. While backpressure
// holds the poll loop waits; a finished message must not wake it unless
// the next poll may take records (or nothing runs any more): woken for
// every finished message it took the source's lock and a new timer each
// time, only to find no room and wait again, 3 µs of the worker's CPU a
// message on the Kafka bench.
func TestKafkaBackpressureQuietPoll(t *testing.T) {
	t.Parallel()
	const n, poll = 400, 16
	c := ktCluster(t, 4) // 4 partitions × their own cap (32) exceed the total cap (96)
	addrs := c.ListenAddrs()
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, ktMsg(i, strconv.Itoa(i%64), false)) // keys spread the records over the partitions
	}
	ktProduce(t, ktClient(t, addrs), recs)
	adm := ktAdmin(t, addrs)

	gate := workertest.NewGate(t)
	cfg := ktConfig(t, addrs, gate.Path)
	cfg.Pipeline.MaxInFlight = 4
	cfg.Executor.PoolSize = 2
	cfg.Sources.Kafka.MaxPollRecords = poll
	w := ktStart(t, cfg)
	held := func() bool {
		w.Src.mu.Lock()
		defer w.Src.mu.Unlock()
		return w.Src.held
	}
	for deadline := time.Now().Add(20 * time.Second); !held(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("backpressure did not hold within 20 s behind a closed gate (waiting cap %d)", w.Src.lim.totalWait)
		}
	}
	gate.Open(t)
	ktWaitCommitted(t, adm, cfg.Sources.Kafka.Group)
	waits, wakes := w.Src.roomWaits.Load(), w.Src.roomWakes.Load()
	// Each time backpressure holds (until fewer than half the cap wait),
	// the loop waits once, plus once a second; a wake per finished
	// message while it holds would be dozens each time.
	if waits < 1 {
		t.Fatalf("the poll loop never waited for room although backpressure held")
	}
	if wakes > waits {
		t.Errorf("the poll loop was woken %d times while backpressure held, finding no room (%d waits, %d messages): a finished message wakes it although the next poll may take nothing",
			wakes, waits, n)
	}
}
