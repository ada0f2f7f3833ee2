package kafkaread

import (
	"context"
	"fmt"
	"sync"

	"svc/worker/kconn"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// MaxStreamRecords is the hard cap of records per stream request.
const MaxStreamRecords = 10000

// StreamQuery selects a time window of one alias, or an offset range of
// one partition (FromOffset set: Partition is required and FromTS is
// ignored).
type StreamQuery struct {
	FromTS    int64  // required, epoch ms >= 0: each partition starts at its first record at or after it
	ToTS      *int64 // optional: a partition stops at its first record with a later timestamp
	Limit     int    // total cap; 0 (absent) or more than MaxStreamRecords means MaxStreamRecords
	Partition *int32 // optional: only this partition
	// FromOffset..ToOffset (inclusive; ToOffset nil: up to the end) of
	// Partition.
	FromOffset, ToOffset *int64
	Isolation            Isolation // the consumer view to read with
}

// Stream calls emit for each record of alias in the window q selects, in
// timestamp order across partitions and offset order within each, up to
// the end-of-topic snapshot taken at its start. Errors are Message's plus
// ErrBadQuery; emit's error ends the stream and is returned wrapped.
func (r *Reader) Stream(ctx context.Context, alias string, q StreamQuery, emit func(Record) error) error {
	return r.StreamRaw(ctx, alias, q, func(rec *kgo.Record) error { return emit(newRecord(alias, rec)) })
}

// StreamRaw is Stream handing out the records as franz-go gives them, with
// their bytes untouched (DLQ redrive re-produces them).
func (r *Reader) StreamRaw(ctx context.Context, alias string, q StreamQuery, emit func(*kgo.Record) error) error {
	a, err := r.resolve(alias)
	if err != nil {
		return err
	}
	if q.FromTS < 0 || q.Limit < 0 {
		return fmt.Errorf("stream alias '%s': from_ts and limit must not be negative: %w", alias, ErrBadQuery)
	}
	if q.FromOffset != nil && (q.Partition == nil || *q.FromOffset < 0 || q.ToOffset != nil && *q.ToOffset < *q.FromOffset) {
		return fmt.Errorf("stream alias '%s': an offset range needs a partition and 0 <= from_offset <= to_offset: %w", alias, ErrBadQuery)
	}
	limit := q.Limit
	if limit == 0 || limit > MaxStreamRecords {
		limit = MaxStreamRecords
	}
	sizer := newFetchSizer(fetchMax(a))
	cl, adm, err := r.newClient(a, q.Isolation, sizer.opts()...)
	if err != nil {
		return err
	}
	defer cl.Close()

	parts, err := r.streamStart(ctx, adm, a, q)
	if err != nil || len(parts) == 0 {
		return err
	}
	m := newMerger(a.Topic, q.ToTS, parts, sizer)
	if r.onMerger != nil {
		r.onMerger(m)
	}
	assign := make(map[int32]kgo.Offset, len(parts))
	for p, ps := range parts {
		assign[p] = kgo.NewOffset().At(ps.start)
	}
	cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{a.Topic: assign})

	ref := newRefetcher(cl, a.Topic, q.Isolation, func(b kgo.FetchBatchMetrics) { sizer.read.Add(int64(b.UncompressedBytes)) })
	read := func(p int32, offset int64, maxBytes int32, each func(*kgo.Record) bool) (int64, error) {
		readCtx, cancel := context.WithTimeout(ctx, r.deadline)
		defer cancel()
		next, err := ref.records(readCtx, p, offset, maxBytes, each)
		if err != nil {
			return next, classify(ctx, readCtx, "stream", alias, err)
		}
		return next, nil
	}
	sent := 0
	for {
		for {
			rec, ok, err := m.pop(cl, m.high(limit-sent), read)
			if err != nil {
				return err
			}
			if !ok {
				break
			}
			if err := emit(rec); err != nil {
				return fmt.Errorf("stream alias '%s': emit record: %w", alias, err)
			}
			if sent++; sent >= limit {
				return nil
			}
		}
		if m.finished() {
			return nil
		}
		// The streamed partitions with nothing queued read on.
		served := false
		for p, ps := range m.parts {
			if m.streamed[p] && ps.open && len(ps.queue) == 0 {
				if err := m.readStreamed(p, ps, read); err != nil {
					return err
				}
				served = true
			}
		}
		if served {
			continue
		}
		pollCtx, cancel := context.WithTimeout(ctx, r.deadline)
		fetches := cl.PollFetches(pollCtx)
		if ctx.Err() != nil {
			cancel()
			return fmt.Errorf("stream alias '%s': %w", alias, ctx.Err())
		}
		fetches.EachPartition(func(fp kgo.FetchTopicPartition) { m.push(fp.Partition, fp.Records) })
		for _, fe := range fetches.Errors() {
			if kconn.IsLargeBatch(fe.Err) {
				m.stream(fe.Partition)
			}
		}
		m.settle(cl, m.high(limit-sent))
		if err := fetchErr(fetches); err != nil && !m.finished() {
			err = classify(ctx, pollCtx, "stream", alias, err)
			cancel()
			return err
		}
		cancel()
	}
}

// streamStart takes the end-of-topic snapshot, applies the partition
// filter and resolves each partition's start from FromTS broker-side,
// leaving out partitions with nothing before their end.
func (r *Reader) streamStart(ctx context.Context, adm *kadm.Client, a AliasSpec, q StreamQuery) (map[int32]*partState, error) {
	opCtx, cancel := context.WithTimeout(ctx, r.deadline)
	defer cancel()
	// Both listings run at once; a start listed past the snapshot is >= end.
	var starts map[int32]int64
	var startsErr error
	var wg sync.WaitGroup
	wg.Go(func() {
		afterMilli := func(ctx context.Context, topics ...string) (kadm.ListedOffsets, error) {
			return adm.ListOffsetsAfterMilli(ctx, q.FromTS, topics...)
		}
		starts, startsErr = listAll(opCtx, afterMilli, a)
	})
	// Starts are listed read_uncommitted whatever q.Isolation: the client
	// skips an aborted record a start falls on.
	ends, err := listAll(opCtx, q.Isolation.endOffsets(adm), a)
	wg.Wait()
	if err == nil {
		err = startsErr
	}
	if err != nil {
		return nil, classify(ctx, opCtx, "stream", a.Name, err)
	}
	if q.Partition != nil {
		if _, ok := ends[*q.Partition]; !ok {
			return nil, fmt.Errorf("alias '%s' partition %d: %w", a.Name, *q.Partition, ErrUnknownPartition)
		}
	}
	parts := make(map[int32]*partState, len(ends))
	for p, end := range ends {
		start, ok := starts[p]
		if q.FromOffset != nil {
			start, ok = *q.FromOffset, true
			if q.ToOffset != nil {
				end = min(end, *q.ToOffset+1)
			}
		}
		if (q.Partition != nil && p != *q.Partition) || !ok || start < 0 || start >= end {
			continue
		}
		parts[p] = &partState{start: start, end: end, open: true, rewind: -1}
	}
	return parts, nil
}
