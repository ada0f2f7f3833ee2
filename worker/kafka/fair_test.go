package kafka

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"svc/worker/config"
	"svc/worker/sink"
	"svc/worker/workertest"
	"svc/worker/workertest/wait"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestKafkaFairAcrossPartitions: a backlog of 4,000 messages on 37 keys
// spread over 4 partitions. Every partition's committed offset moves
// before any one partition is done; served one partition at a time, the
// first would reach its end while the others were still at 0.
func TestKafkaFairAcrossPartitions(t *testing.T) {
	if testing.Short() {
		// 200 messages finished within one commit interval on a quiet
		// machine: the first commit held every partition's end, and the
		// check failed 13 times in 15.
		t.Skip("the backlog must outlast several commit intervals to show fairness: runs in the full suite")
	}
	t.Parallel()
	const parts = 4
	n := 4000
	c := ktCluster(t, parts)
	addrs := c.ListenAddrs()
	var recs []*kgo.Record
	for i := range n {
		r := ktMsg(i, fmt.Sprintf("key-%d", i%37), false)
		r.Partition = int32(i % parts)
		recs = append(recs, r)
	}
	ktProduce(t, ktManual(t, addrs), recs)
	adm := ktAdmin(t, addrs)
	ends := ktEnds(t, adm, ktIn)

	cfg := ktConfig(t, addrs, workertest.EchoScript(t))
	cfg.Pipeline.MaxInFlight = 16
	w := ktNew(t, cfg)
	var mu sync.Mutex
	latest := map[int32]int64{}
	var atFirstEnd map[int32]int64 // every partition's commit when the first one reached its end
	w.Src.onCommit = func(m map[int32]int64) {
		mu.Lock()
		defer mu.Unlock()
		for p, o := range m {
			latest[p] = o
			if o == ends[p] && atFirstEnd == nil {
				atFirstEnd = map[int32]int64{}
				for q, v := range latest {
					atFirstEnd[q] = v
				}
			}
		}
	}
	w.Start()
	ktWaitCommitted(t, adm, cfg.Sources.Kafka.Group)

	mu.Lock()
	defer mu.Unlock()
	for p := range int32(parts) {
		if atFirstEnd[p] == 0 {
			t.Errorf("when the first partition was done, commits were %v (ends %v): partition %d had not moved", atFirstEnd, ends, p)
		}
	}
	t.Logf("commits when the first partition was done: %v of %v", atFirstEnd, ends)
}

// TestKafkaHotKeyDoesNotStallOthers: 500 messages of one hot key
// interleaved with 500 messages of unique keys (120 and 120 with -short,
// the hot key's lane running one at a time); the hot key's executions
// are held. The unique keys of the other partitions all finish and some of
// the hot key's own partition do too, while the hot lane has not finished
// one message: its queue holds one running slot, not the whole in-flight
// budget. Once released, the hot key's messages reach the sink in order.
func TestKafkaHotKeyDoesNotStallOthers(t *testing.T) {
	if testing.Short() {
		t.Skip("a held hot key among hundreds of messages on 4 partitions: runs in the full suite")
	}
	t.Parallel()
	const parts = 4
	n := 1000
	if testing.Short() {
		n = 120 // still 60 hot messages, far over the 16 in flight
	}
	c := ktCluster(t, parts)
	addrs := c.ListenAddrs()
	gate := filepath.Join(t.TempDir(), "hot-gate")
	exe := workertest.Script(t, `IFS= read -r in
case "$in" in *hot*) while [ ! -e '`+gate+`' ]; do sleep 0.05; done;; esac
printf 'out:%s' "$in"`)
	cfg := ktConfig(t, addrs, exe)
	cfg.Pipeline.MaxInFlight = 16
	cfg.Executor.Timeout = config.Duration(10 * time.Minute)
	group := cfg.Sources.Kafka.Group
	adm := ktAdmin(t, addrs)
	w := ktStart(t, cfg)
	w.WaitJoined()

	var recs []*kgo.Record
	unique := map[int32][]int{} // partition → ids of unique-key messages
	for i := range n {
		var r *kgo.Record
		if i%2 == 0 {
			r = ktMsg(i, "hot", false)
			r.Value = append(r.Value, " hot"...)
			r.Partition = 0
		} else {
			r = ktMsg(i, "u-"+strconv.Itoa(i), false)
			r.Partition = int32(i/2) % parts
			unique[r.Partition] = append(unique[r.Partition], i)
		}
		recs = append(recs, r)
	}
	ktProduce(t, ktManual(t, addrs), recs)

	wait.For(t, ktWait, "unique keys of the other partitions finish while the hot key is held", func() (bool, string) {
		out := ktCountIDs(ktReadAll(t, addrs, ktOut))
		left := 0
		for p := int32(1); p < parts; p++ {
			for _, id := range unique[p] {
				if out[id] == 0 {
					left++
				}
			}
		}
		return left == 0, fmt.Sprintf("%d unique-key messages of partitions 1-3 not in the sink (%d in flight, %d waiting:%s, polled %v)", left, w.InFlight(), w.Waiting(), w.QueueDetail(), w.Metric("svc_kafka_records_polled_total"))
	})
	sinkRecs := ktReadAll(t, addrs, ktOut)
	out := ktCountIDs(sinkRecs)
	hotDone, p0Unique := 0, 0
	for id, k := range out {
		switch {
		case id%2 == 0 && k > 0:
			hotDone++
		case slices.Contains(unique[0], id):
			p0Unique++
		}
	}
	if hotDone != 0 {
		t.Fatalf("%d hot-key messages in the sink while the hot key is held: the test's executor is broken", hotDone)
	}
	if p0Unique == 0 {
		t.Errorf("no unique-key message of the hot key's partition finished while the hot key was held: the hot lane blocks its whole partition")
	}
	t.Logf("while the hot key was held: all %d unique-key messages of partitions 1-3 and %d of %d on the hot partition finished",
		n/2-len(unique[0]), p0Unique, len(unique[0]))

	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	ktWaitCommitted(t, adm, group)
	sinkRecs = ktReadAll(t, addrs, ktOut)
	out, dlq := ktCountIDs(sinkRecs), ktCountIDs(ktReadAll(t, addrs, ktDLQ))
	ktCheckAllOut(t, ktIDs(0, n), out, dlq)
	last := int64(-1)
	for _, r := range sinkRecs {
		if string(r.Key) != "hot" {
			continue
		}
		h, _ := ktHeader(r, sink.HeaderSourceOffset)
		off, _ := strconv.ParseInt(h, 10, 64)
		if off < last {
			t.Errorf("hot key: source offset %d reached the sink after %d", off, last)
		}
		last = off
	}
}
