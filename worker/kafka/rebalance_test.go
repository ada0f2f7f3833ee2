package kafka

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"svc/worker/sink"
	"svc/worker/workertest"
	"svc/worker/workertest/wait"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestKafkaRebalanceSurvivor runs two workers in one group (cooperative-
// sticky) under a continuous stream, stops one as main does (intake
// cancelled, drain, close), and checks that the survivor takes every
// partition and that no message is lost across both rebalances.
func TestKafkaRebalanceSurvivor(t *testing.T) {
	t.Parallel()
	const parts = 6
	c := ktCluster(t, parts)
	addrs := c.ListenAddrs()
	exe := workertest.EchoScript(t)
	cfgA, cfgB := ktConfig(t, addrs, exe), ktConfig(t, addrs, exe)
	cfgB.Sources.Kafka.Group = cfgA.Sources.Kafka.Group
	group := cfgA.Sources.Kafka.Group

	a := ktStart(t, cfgA)
	a.WaitJoined()

	// A steady stream for the whole test: 500 messages a second, 50 in
	// -short runs (every message is a spawned process; the rebalances, not
	// the rate, are what is tested).
	batch, after := 10, int64(200)
	if testing.Short() {
		batch, after = 1, 50
	}
	prod := ktClient(t, addrs)
	var sent atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			var recs []*kgo.Record
			from := int(sent.Load())
			for i := from; i < from+batch; i++ {
				recs = append(recs, ktMsg(i, fmt.Sprintf("k%d", i%13), i%40 == 3))
			}
			// Not ktProduce: t.Fatal is for the test goroutine only.
			if err := prod.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
				t.Errorf("produce: %v", err)
				return
			}
			sent.Add(int64(len(recs)))
		}
	})
	t.Cleanup(func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		wg.Wait()
	})

	b := ktStart(t, cfgB)
	wait.For(t, ktWait, "both workers share the partitions", func() (bool, string) {
		oa, ob := a.Owned(), b.Owned()
		all := slices.Sorted(slices.Values(append(slices.Clone(oa), ob...)))
		return len(oa) > 0 && len(ob) > 0 && len(all) == parts && len(slices.Compact(all)) == parts,
			fmt.Sprintf("A owns %v, B owns %v", oa, ob)
	})
	wait.For(t, ktWait, "both workers process messages", func() (bool, string) {
		na, nb := a.Metric("svc_tasks_total"), b.Metric("svc_tasks_total")
		return na > 20 && nb > 20, fmt.Sprintf("A ran %v tasks, B %v", na, nb)
	})

	b.Stop()
	wait.For(t, ktWait, "the survivor owns every partition", func() (bool, string) {
		return len(a.Owned()) == parts, fmt.Sprintf("A owns %v", a.Owned())
	})
	atStop := sent.Load()
	wait.For(t, ktWait, "the stream goes on after the rebalance", func() (bool, string) {
		return sent.Load() > atStop+after, fmt.Sprintf("%d sent", sent.Load())
	})
	close(stop)
	wg.Wait()

	adm := ktAdmin(t, addrs)
	ktWaitCommitted(t, adm, group)
	n := int(sent.Load())
	sinkRecs := ktReadAll(t, addrs, ktOut)
	out, dlq := ktCountIDs(sinkRecs), ktCountIDs(ktReadAll(t, addrs, ktDLQ))
	ktCheckAllOut(t, ktIDs(0, n), out, dlq)
	by := map[string]int{}
	for _, r := range sinkRecs {
		w, _ := ktHeader(r, sink.HeaderWorker)
		by[w]++
	}
	if by[cfgA.Worker.Name] == 0 || by[cfgB.Worker.Name] == 0 {
		t.Errorf("sink records by worker = %v, want records from both %s and %s", by, cfgA.Worker.Name, cfgB.Worker.Name)
	}
	if got := a.Metric("svc_kafka_rebalance_events_total", "kind", "lost"); got != 0 {
		t.Errorf("survivor lost partitions %v times, want 0 (graceful rebalances only)", got)
	}
}
