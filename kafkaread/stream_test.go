package kafkaread

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"

	"svc/worker/kconn"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// windowTopic seeds topicIn with 3 partitions of 10 records each; record i
// of partition p has timestamp 1000 + 3*i + p, so timestamps 1000-1029 are
// unique and spread round-robin over the partitions.
func windowTopic(t *testing.T) (*kfake.Cluster, *Reader) {
	t.Helper()
	c := newCluster(t, kfake.SeedTopics(3, topicIn))
	pr := newProducer(t, c.ListenAddrs())
	var recs []*kgo.Record
	for i := range 10 {
		for p := range int32(3) {
			recs = append(recs, rec(p, int64(1000+3*i)+int64(p), "", "v"))
		}
	}
	produce(t, pr, topicIn, recs...)
	return c, sourceReader(t, c, topicIn)
}

func timestamps(recs []Record) []int64 {
	out := make([]int64, 0, len(recs))
	for _, r := range recs {
		out = append(out, *r.TimestampMs)
	}
	return out
}

func span(from, to int64) []int64 {
	var out []int64
	for ts := from; ts <= to; ts++ {
		out = append(out, ts)
	}
	return out
}

func TestStreamWindow(t *testing.T) {
	t.Parallel()
	c, r := windowTopic(t)
	tests := []struct {
		name string
		q    StreamQuery
		want []int64 // timestamps, in emitted order
	}{
		{"whole topic", StreamQuery{FromTS: 0}, span(1000, 1029)},
		{"from_ts per partition", StreamQuery{FromTS: 1010}, span(1010, 1029)},
		{"from_ts between records", StreamQuery{FromTS: 1027}, span(1027, 1029)},
		{"to_ts", StreamQuery{FromTS: 1005, ToTS: ptr(int64(1014))}, span(1005, 1014)},
		{"limit", StreamQuery{FromTS: 1003, Limit: 7}, span(1003, 1009)},
		{"partition filter", StreamQuery{FromTS: 0, Partition: ptr(int32(1))}, []int64{1001, 1004, 1007, 1010, 1013, 1016, 1019, 1022, 1025, 1028}},
		{"from_ts after the last record", StreamQuery{FromTS: 5000}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			recs, err := collect(t, r, "source", tt.q)
			if err != nil {
				t.Fatalf("Stream(%+v) error = %v", tt.q, err)
			}
			if got := timestamps(recs); !slices.Equal(got, tt.want) {
				t.Errorf("Stream(%+v) timestamps = %v, want %v", tt.q, got, tt.want)
			}
			last := map[int32]int64{}
			for _, rec := range recs {
				if prev, ok := last[rec.Partition]; ok && rec.Offset <= prev {
					t.Errorf("partition %d offset %d after %d: not monotonic", rec.Partition, rec.Offset, prev)
				}
				last[rec.Partition] = rec.Offset
			}
		})
	}

	errTests := []struct {
		name  string
		alias string
		q     StreamQuery
		want  error
	}{
		{"unknown partition", "source", StreamQuery{Partition: ptr(int32(9))}, ErrNotFound},
		{"unknown alias", "nope", StreamQuery{}, ErrNotFound},
		{"unavailable alias", "missing", StreamQuery{}, ErrNotFound},
		{"negative from_ts", "source", StreamQuery{FromTS: -1}, ErrBadQuery},
		{"negative limit", "source", StreamQuery{Limit: -1}, ErrBadQuery},
	}
	r2, err := New([]AliasSpec{
		{Name: "source", Kind: KindSource, Topic: topicIn, Conn: kconn.Conn{Brokers: c.ListenAddrs()}},
		{Name: "missing", Kind: KindSink, Unavailable: "alias 'missing' is not available: no topic is configured for it"},
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	for _, tt := range errTests {
		t.Run(tt.name, func(t *testing.T) {
			recs, err := collect(t, r2, tt.alias, tt.q)
			if !errors.Is(err, tt.want) || len(recs) != 0 {
				t.Errorf("Stream(%s, %+v) = %d records, %v, want no record and %v", tt.alias, tt.q, len(recs), err, tt.want)
			}
			assertNoLeak(t, err, c.ListenAddrs())
		})
	}
}

func TestStreamToTSStopsPartition(t *testing.T) {
	t.Parallel()
	c := newCluster(t, kfake.SeedTopics(1, topicIn))
	produce(t, newProducer(t, c.ListenAddrs()), topicIn, rec(0, 100, "", "a"), rec(0, 300, "", "b"), rec(0, 200, "", "c"))
	recs, err := collect(t, sourceReader(t, c, topicIn), "source", StreamQuery{FromTS: 0, ToTS: ptr(int64(250))})
	if err != nil || len(recs) != 1 || recs[0].Payload != "a" {
		t.Fatalf("Stream(to_ts 250) = %+v, %v, want only the record before the first one past to_ts", recs, err)
	}
}

func TestStreamTraversal(t *testing.T) {
	t.Parallel()
	_, r := windowTopic(t)
	var all []int64
	from := int64(0)
	for range 10 {
		recs, err := collect(t, r, "source", StreamQuery{FromTS: from, Limit: 7})
		if err != nil {
			t.Fatalf("Stream(from %d) error = %v", from, err)
		}
		if len(recs) == 0 {
			break
		}
		ts := timestamps(recs)
		all = append(all, ts...)
		from = ts[len(ts)-1] + 1
	}
	if want := span(1000, 1029); !slices.Equal(all, want) {
		t.Errorf("windows of 7 concatenated = %v, want %v (no gap, no repeat)", all, want)
	}
	// Reads are idempotent: the same request returns the same records.
	a, errA := collect(t, r, "source", StreamQuery{FromTS: 1004, Limit: 5})
	b, errB := collect(t, r, "source", StreamQuery{FromTS: 1004, Limit: 5})
	if errA != nil || errB != nil || !slices.Equal(timestamps(a), timestamps(b)) {
		t.Errorf("repeated Stream = %v / %v, %v / %v, want equal", timestamps(a), timestamps(b), errA, errB)
	}
}

func TestStreamHardCap(t *testing.T) {
	t.Parallel()
	c := newCluster(t, kfake.SeedTopics(2, topicBig))
	recs := make([]*kgo.Record, 0, MaxStreamRecords+50)
	for i := range MaxStreamRecords + 50 {
		recs = append(recs, rec(int32(i%2), int64(1000+i), "", "x"))
	}
	produce(t, newProducer(t, c.ListenAddrs()), topicBig, recs...)
	r := sourceReader(t, c, topicBig)
	for _, limit := range []int{0, MaxStreamRecords + 1, 50000} {
		n := 0
		err := r.Stream(t.Context(), "source", StreamQuery{Limit: limit}, func(Record) error { n++; return nil })
		if err != nil || n != MaxStreamRecords {
			t.Errorf("Stream(limit %d) = %d records, %v, want %d", limit, n, err, MaxStreamRecords)
		}
	}
}

func TestStreamSnapshot(t *testing.T) {
	t.Parallel()
	c := newCluster(t, kfake.SeedTopics(1, topicIn))
	pr := newProducer(t, c.ListenAddrs())
	for i := range 5 {
		produce(t, pr, topicIn, rec(0, int64(1000+i), "", "old"))
	}
	r := sourceReader(t, c, topicIn)
	var got []Record
	err := r.Stream(t.Context(), "source", StreamQuery{}, func(r Record) error {
		if len(got) == 0 { // produced after the snapshot: must not be returned
			for i := range 5 {
				produce(t, pr, topicIn, rec(0, int64(2000+i), "", "new"))
			}
		}
		got = append(got, r)
		return nil
	})
	if err != nil || len(got) != 5 {
		t.Fatalf("Stream() = %d records, %v, want the 5 records of the snapshot", len(got), err)
	}
	for _, rec := range got {
		if rec.Payload != "old" {
			t.Errorf("Stream() returned %+v, produced after the request started", rec)
		}
	}
	emitErr := errors.New("client went away")
	err = r.Stream(t.Context(), "source", StreamQuery{}, func(Record) error { return emitErr })
	if !errors.Is(err, emitErr) {
		t.Errorf("Stream(failing emit) = %v, want the emit error", err)
	}
}

// TestStreamReadAheadIsBounded: a client that stops reading does not make
// the worker fetch the whole window: what is queued beyond what was
// emitted stays within queueBudget (plus a record per partition).
func TestStreamReadAheadIsBounded(t *testing.T) {
	t.Parallel()
	c := newCluster(t, kfake.SeedTopics(4, topicIn))
	pr := newProducer(t, c.ListenAddrs())
	value := string(bytes.Repeat([]byte("x"), 4<<10))
	var recs []*kgo.Record
	for i := range 8000 { // 32 MiB over 4 partitions
		recs = append(recs, rec(int32(i%4), int64(1000+i), "", value))
	}
	produce(t, pr, topicIn, recs...)
	r := sourceReader(t, c, topicIn)
	var m atomic.Pointer[merger]
	r.onMerger = func(x *merger) { m.Store(x) }
	emitted := 0
	stalled := make(chan struct{})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = r.Stream(ctx, "source", StreamQuery{FromTS: 0}, func(Record) error {
			emitted++
			if emitted == 200 { // the client stops reading here
				close(stalled)
				<-ctx.Done()
				return ctx.Err()
			}
			return nil
		})
	}()
	<-stalled
	cancel()
	<-done
	// The merger's own goroutine is the one that stalled, so its peak is
	// what it queued before and while the client stopped.
	if peak, limit := m.Load().peak, queueBudget+4*len(value); peak > limit {
		t.Errorf("queued up to %d bytes for a client that took 200 records, want at most %d (queueBudget + a record per partition)", peak, limit)
	}
}

// TestStreamOffsetRange: an offset range of one partition reads exactly
// those offsets (inclusive), clipped to what exists.
func TestStreamOffsetRange(t *testing.T) {
	t.Parallel()
	_, r := windowTopic(t)
	for _, c := range []struct {
		from int64
		to   *int64
		want []int64
	}{
		{2, ptr(int64(5)), []int64{2, 3, 4, 5}},
		{7, nil, []int64{7, 8, 9}},
		{8, ptr(int64(100)), []int64{8, 9}},
		{12, nil, nil},
	} {
		recs, err := collect(t, r, "source", StreamQuery{Partition: ptr(int32(1)), FromOffset: ptr(c.from), ToOffset: c.to})
		if err != nil {
			t.Fatalf("Stream(offsets %d..%v) = %v", c.from, c.to, err)
		}
		var got []int64
		for _, rec := range recs {
			if rec.Partition != 1 {
				t.Errorf("record of partition %d", rec.Partition)
			}
			got = append(got, rec.Offset)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("Stream(offsets %d..%v) = %v, want %v", c.from, c.to, got, c.want)
		}
	}
	if _, err := collect(t, r, "source", StreamQuery{FromOffset: ptr(int64(1))}); !errors.Is(err, ErrBadQuery) {
		t.Errorf("offset range without a partition = %v, want ErrBadQuery", err)
	}
}
