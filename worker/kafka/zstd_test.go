package kafka

import (
	"fmt"
	"testing"
	"time"

	"svc/worker/workertest/wait"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestKafkaBatchTooLargeStallsItsPartition (issue 38, item 1): a batch
// that decompresses to more than MaxBatchBytes (a zstd batch of zeros,
// a few kilobytes stored) is refused before it is decompressed: its
// partition stalls at it, counted once, with nothing processed or
// skipped past it (the committed offset stays before it), while the
// other partitions go on. It never reaches the executor nor crashes the
// worker, and the client does not fetch it again and again.
func TestKafkaBatchTooLargeStallsItsPartition(t *testing.T) {
	t.Parallel()
	c := ktCluster(t, 2)
	addrs := c.ListenAddrs()
	cfg := ktConfig(t, addrs, ktBigScript(t))
	w := ktStart(t, cfg)
	w.WaitJoined()
	pr := ktClient(t, addrs, kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.ZstdCompression()), kgo.ProducerBatchMaxBytes(MaxBatchBytes+1<<20))
	at := func(id int, p int32) *kgo.Record { r := ktMsg(id, "", false); r.Partition = p; return r }
	ktProduce(t, pr, []*kgo.Record{at(0, 0)})
	ktProduce(t, pr, []*kgo.Record{{Topic: ktIn, Partition: 0, Value: make([]byte, MaxBatchBytes+1)}}) // offset 1
	ktProduce(t, pr, []*kgo.Record{at(2, 0), at(3, 1)})

	var out map[int]int
	wait.For(t, ktWait, "messages 0 and 3 in the sink", func() (bool, string) {
		out, _ = ktCollect(t, addrs, addrs)
		return out[0] > 0 && out[3] > 0, fmt.Sprintf("sink holds %v", out)
	})
	wait.For(t, ktWait, "the batch counted as too large", func() (bool, string) {
		n := w.Metric("svc_kafka_batches_too_large_total")
		return n == 1, fmt.Sprintf("svc_kafka_batches_too_large_total = %v", n)
	})
	time.Sleep(2 * time.Second) // the client could fetch and refuse it again meanwhile
	if n := w.Metric("svc_kafka_batches_too_large_total"); n != 1 {
		t.Errorf("svc_kafka_batches_too_large_total = %v after 2 s, want 1 (the partition stalls; it is not fetched again)", n)
	}
	out, dlq := ktCollect(t, addrs, addrs)
	if out[2] != 0 || len(dlq) != 0 {
		t.Errorf("message 2, after the batch, reached the sink %d times (DLQ %v): the partition must stall at the batch", out[2], dlq)
	}
	adm := kadm.NewClient(ktClient(t, addrs))
	if got := ktCommitted(t, adm, cfg.Sources.Kafka.Group)[0]; got != 1 {
		t.Errorf("committed offset of partition 0 = %d, want 1 (before the batch: nothing skipped)", got)
	}
}
