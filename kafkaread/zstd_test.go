package kafkaread

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// zeroTopic writes parts partitions of batches batches each of perBatch
// records of size bytes, zstd-compressed, to topic on c: zeros but for
// the record's partition and its index in the partition in the first 8
// bytes (zeroValue), timestamps one apart round-robin over the
// partitions, so that a merged read alternates partitions record by
// record.
func zeroTopic(t testing.TB, c *kfake.Cluster, topic string, parts, batches, perBatch, size int) {
	t.Helper()
	if err := c.CreateTopic(topic, int32(parts), nil); err != nil {
		t.Fatal(err)
	}
	cl := newProducer(t, c.ListenAddrs(), kgo.ProducerBatchCompression(kgo.ZstdCompression()),
		kgo.ProducerBatchMaxBytes(int32(perBatch*(size+512))), kgo.ProducerLinger(time.Second),
		kgo.MaxBufferedBytes(0))
	ts := int64(1_000_000)
	for b := range batches {
		var recs []*kgo.Record
		for i := range perBatch {
			for p := range parts {
				ts++
				recs = append(recs, &kgo.Record{Partition: int32(p), Timestamp: time.UnixMilli(ts), Value: zeroValue(p, b*perBatch+i, size)})
			}
		}
		produceFlushed(t, cl, topic, recs...)
	}
}

// produceFlushed writes recs to topic as produce does, but sends them
// with Flush at once, not after cl's linger: the linger only makes the
// records of a partition share one batch.
func produceFlushed(t testing.TB, cl *kgo.Client, topic string, recs ...*kgo.Record) {
	t.Helper()
	errs := make(chan error, len(recs))
	for _, r := range recs {
		r.Topic = topic
		cl.Produce(context.Background(), r, func(_ *kgo.Record, err error) { errs <- err })
	}
	if err := cl.Flush(t.Context()); err != nil {
		t.Fatalf("flush: %v", err)
	}
	for range recs {
		if err := <-errs; err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
}

func zeroValue(p, i, size int) []byte {
	v := make([]byte, size)
	binary.BigEndian.PutUint32(v, uint32(p))
	binary.BigEndian.PutUint32(v[4:], uint32(i))
	return v
}

// TestStreamHoldsNoRecordPerPartition (issue 38, item 1): a stream of a
// topic of large records over many partitions, in batches that inflate a
// thousandfold, holds at most queueBudget of records (plus the one it
// emits) for a client that reads slowly, not one record per partition;
// each fetch decompresses one batch (plus fetchBudget); and every record
// comes out whole and in timestamp order.
func TestStreamHoldsNoRecordPerPartition(t *testing.T) {
	c := newCluster(t)
	const parts, batches, perBatch, size = 16, 1, 4, 256 << 10
	zeroTopic(t, c, topicBig, parts, batches, perBatch, size)
	r := sourceReader(t, c, topicBig)
	var m *merger
	r.onMerger = func(x *merger) { m = x }
	var got []Record
	var last int64
	err := r.Stream(t.Context(), "source", StreamQuery{}, func(rec Record) error {
		if len(got)%8 == 0 {
			time.Sleep(time.Millisecond) // a slow client
		}
		got = append(got, rec)
		if *rec.TimestampMs <= last {
			return fmt.Errorf("record at %d after one at %d", *rec.TimestampMs, last)
		}
		last = *rec.TimestampMs
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != parts*batches*perBatch {
		t.Fatalf("read %d records, want %d", len(got), parts*batches*perBatch)
	}
	for _, rec := range got {
		want := string(zeroValue(int(rec.Partition), int(rec.Offset), size))
		if rec.Payload != want {
			t.Fatalf("partition %d offset %d: the payload is not the record's (%q...)", rec.Partition, rec.Offset, rec.Payload[:8])
		}
	}
	// Before the fix the merge kept a whole record of each partition
	// (16 × 256 KiB = 4 MiB), and more of the first fetch.
	if limit := queueBudget + size; m.peak > limit {
		t.Errorf("the stream queued up to %d KiB of records, want at most %d KiB (queueBudget and the record it emits), not a record per partition", m.peak>>10, limit>>10)
	}
	if m.fills == 0 {
		t.Error("no record was read again: the test does not exercise the stand-ins")
	}
}

// TestStreamZstdFetchIsBounded (issue 38, item 1): however much its
// batches inflate, one fetch of a stream decompresses at most
// 2 × fetchBudget; larger batches are read as streams. Before the fix
// the first fetch of a topic of zstd zeros decompressed a batch of every
// partition at once.
func TestStreamZstdFetchIsBounded(t *testing.T) {
	c := newCluster(t)
	const parts, perBatch, size = 16, 4, 256 << 10
	zeroTopic(t, c, topicBig, parts, 1, perBatch, size)
	var most, fetched atomic.Int64
	hook := fetchHook{onBatch: func(n int64) {
		if v := fetched.Add(n); v > most.Load() {
			most.Store(v)
		}
	}, onFetch: func() { fetched.Store(0) }}
	r := sourceReader(t, c, topicBig)
	r.extraOpts = []kgo.Opt{kgo.WithHooks(hook)}
	n := 0
	if err := r.Stream(t.Context(), "source", StreamQuery{}, func(Record) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	if n != parts*perBatch {
		t.Fatalf("read %d records, want %d", n, parts*perBatch)
	}
	// A batch larger than fetchBudget is read as a stream, never whole:
	// a fetch decompresses at most a first batch of fetchBudget and
	// fetchBudget more.
	if got, limit := most.Load(), int64(2*fetchBudget); got > limit {
		t.Errorf("one fetch decompressed %d KiB, want at most %d KiB (batches of %d KiB are read as streams)", got>>10, limit>>10, perBatch*size>>10)
	}
}

// fetchHook counts what each fetch response decompresses.
type fetchHook struct {
	onBatch func(int64)
	onFetch func()
}

func (h fetchHook) OnBrokerRead(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if key == 1 && err == nil {
		h.onFetch()
	}
}

func (h fetchHook) OnFetchBatchRead(_ kgo.BrokerMetadata, _ string, _ int32, m kgo.FetchBatchMetrics) {
	if m.CompressionType != 0 {
		h.onBatch(int64(m.UncompressedBytes))
	}
}

// TestReadBatchTooLarge: a batch that decompresses to more than
// MaxReadBatchBytes is a clear error naming its offsets, for a single
// record and for a stream, refused before it is decompressed.
func TestReadBatchTooLarge(t *testing.T) {
	c := newCluster(t)
	zeroTopic(t, c, topicBig, 1, 1, 1, MaxReadBatchBytes+1)
	r := sourceReader(t, c, topicBig)
	_, err := r.Message(t.Context(), "source", 0, 0, ReadUncommitted)
	var tl *BatchTooLargeError
	if !errors.As(err, &tl) || !errors.Is(err, ErrTooLarge) || tl.Partition != 0 || tl.From != 0 || tl.Next != 1 {
		t.Fatalf("Message() = %v, want a BatchTooLargeError for offsets 0-0", err)
	}
	t.Logf("%v", err)
	assertNoLeak(t, err, c.ListenAddrs())
	_, err = collect(t, r, "source", StreamQuery{})
	if !errors.As(err, &tl) {
		t.Fatalf("Stream() = %v, want a BatchTooLargeError", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	err = r.ScanRanges(ctx, "source", nil, ReadUncommitted, func(m map[int32]Marks) map[int32]Range {
		return map[int32]Range{0: {From: 0, To: 1}}
	}, func(*kgo.Record) error { return nil })
	if !errors.As(err, &tl) {
		t.Fatalf("ScanRanges() = %v, want a BatchTooLargeError", err)
	}
}

// TestLargeBatchesReadAsStreams: batches too large to decompress whole
// (over fetchBudget) are read as streams by every read, with the view of
// the read's isolation: under read_committed the records of an aborted
// transaction are left out, under read_uncommitted they are shown; a
// stream, a scan and a single-record read agree.
func TestLargeBatchesReadAsStreams(t *testing.T) {
	c := newCluster(t)
	if err := c.CreateTopic(topicBig, 1, nil); err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.TransactionalID("kafkaread-large"), kgo.ProducerBatchCompression(kgo.ZstdCompression()),
		kgo.ProducerBatchMaxBytes(4<<20), kgo.ProducerLinger(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	const size = 300 << 10 // two a batch: 600 KiB, over fetchBudget
	for i, end := range []kgo.TransactionEndTry{kgo.TryCommit, kgo.TryAbort, kgo.TryCommit} {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		recs := []*kgo.Record{
			{Topic: topicBig, Timestamp: time.UnixMilli(int64(1000 + 2*i)), Value: zeroValue(i, 0, size)},
			{Topic: topicBig, Timestamp: time.UnixMilli(int64(1001 + 2*i)), Value: zeroValue(i, 1, size)},
		}
		produceFlushed(t, cl, topicBig, recs...)
		if err := cl.EndTransaction(t.Context(), end); err != nil {
			t.Fatal(err)
		}
	}
	// Offsets: 0-1 committed, 2 marker, 3-4 aborted, 5 marker, 6-7
	// committed, 8 marker.
	r := sourceReader(t, c, topicBig)
	var m *merger
	r.onMerger = func(x *merger) { m = x }
	for _, tc := range []struct {
		iso  Isolation
		want []int64
	}{
		{ReadCommitted, []int64{0, 1, 6, 7}},
		{ReadUncommitted, []int64{0, 1, 3, 4, 6, 7}},
	} {
		recs, err := collect(t, r, "source", StreamQuery{Isolation: tc.iso})
		if err != nil {
			t.Fatalf("%v: Stream: %v", tc.iso, err)
		}
		var got []int64
		for _, rec := range recs {
			got = append(got, rec.Offset)
			if want := string(zeroValue(int(rec.Offset/3), int(rec.Offset%3), size)); rec.Payload != want {
				t.Errorf("%v: offset %d: not the record's payload", tc.iso, rec.Offset)
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%v: Stream read offsets %v, want %v", tc.iso, got, tc.want)
		}
		if len(m.streamed) == 0 {
			t.Errorf("%v: no partition was read as a stream: the test does not exercise it", tc.iso)
		}
		got = nil
		err = r.ScanRanges(t.Context(), "source", nil, tc.iso, func(mk map[int32]Marks) map[int32]Range {
			return map[int32]Range{0: {From: mk[0].Low, To: mk[0].High}}
		}, func(rec *kgo.Record) error {
			got = append(got, rec.Offset)
			return nil
		})
		if err != nil || fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%v: ScanRanges read offsets %v, %v; want %v", tc.iso, got, err, tc.want)
		}
		for _, o := range []int64{1, 3, 6} {
			rec, err := r.Message(t.Context(), "source", 0, o, tc.iso)
			shown := slices.Contains(tc.want, o)
			var gone *GoneError
			switch {
			case shown && (err != nil || rec.Offset != o || rec.PayloadSizeBytes != size):
				t.Errorf("%v: Message(%d) = offset %d, %v", tc.iso, o, rec.Offset, err)
			case !shown && (!errors.As(err, &gone) || gone.Next != 6):
				t.Errorf("%v: Message(%d) = %v, want gone, next 6", tc.iso, o, err)
			}
		}
	}
}
