package kafkaread

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkStream reads 10,000 records of 1 KiB from a 4-partition topic
// (written in the producer's default snappy batches of up to 1 MB),
// through Reader.Stream and through a bare assign-only kgo consumer, and
// reports the time to the first record beside the total time per read.
// For the reader, read-x is the decompressed bytes fetched over the bytes
// emitted: more than 1 when a batch larger than a partition's share of the
// read-ahead is fetched again for each part of it.
func BenchmarkStream(b *testing.B) {
	const n, partitions = MaxStreamRecords, 4
	c := newCluster(b, kfake.SeedTopics(partitions, topicBig))
	pr := newProducer(b, c.ListenAddrs())
	payload := bytes.Repeat([]byte("x"), 1024)
	base := time.Now().Add(-time.Hour).UnixMilli()
	recs := make([]*kgo.Record, 0, n)
	for i := range n {
		recs = append(recs, &kgo.Record{Partition: int32(i % partitions), Timestamp: time.UnixMilli(base + int64(i)), Value: payload})
	}
	produce(b, pr, topicBig, recs...)

	b.Run("reader", func(b *testing.B) {
		r := sourceReader(b, c, topicBig)
		var m *merger
		r.onMerger = func(x *merger) { m = x }
		var first time.Duration
		var read int64
		for b.Loop() {
			start, got := time.Now(), 0
			err := r.Stream(context.Background(), "source", StreamQuery{FromTS: base}, func(Record) error {
				if got++; got == 1 {
					first += time.Since(start)
				}
				return nil
			})
			if err != nil || got != n {
				b.Fatalf("Stream() = %d records, %v, want %d", got, err, n)
			}
			read += m.sizer.read.Load()
		}
		b.ReportMetric(float64(first.Microseconds())/1000/float64(b.N), "ms-to-first/op")
		b.ReportMetric(float64(read)/float64(b.N*n*len(payload)), "read-x")
	})

	b.Run("bare-kgo", func(b *testing.B) {
		var first time.Duration
		for b.Loop() {
			start, got := time.Now(), 0
			offsets := make(map[int32]kgo.Offset, partitions)
			for p := range int32(partitions) {
				offsets[p] = kgo.NewOffset().AtStart()
			}
			cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...),
				kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topicBig: offsets}))
			if err != nil {
				b.Fatalf("kgo.NewClient: %v", err)
			}
			for got < n {
				fetches := cl.PollFetches(context.Background())
				if err := fetches.Err(); err != nil {
					b.Fatalf("poll: %v", err)
				}
				fetches.EachRecord(func(*kgo.Record) {
					if got++; got == 1 {
						first += time.Since(start)
					}
				})
			}
			cl.Close()
		}
		b.ReportMetric(float64(first.Microseconds())/1000/float64(b.N), "ms-to-first/op")
	})
}
