package kafkaread

import (
	"context"
	"fmt"

	"svc/worker/kconn"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Marks are one partition's watermarks when a scan starts: its records
// are at offsets [Low, High).
type Marks struct{ Low, High int64 }

// Range is offsets [From, To) of one partition.
type Range struct{ From, To int64 }

// scanStreamed visits the records of partition p in [from, to) with the
// refetcher, one fetch of at most fetchBudget at a time: the error of
// visit that ended it, or the read's.
func scanStreamed(ctx context.Context, ref *refetcher, p int32, from, to int64, visit func(*kgo.Record) error) (visitErr, err error) {
	for from < to {
		var next int64
		next, err = ref.records(ctx, p, from, fetchBudget, func(rec *kgo.Record) bool {
			if rec.Offset >= to {
				return false
			}
			visitErr = visit(rec)
			return visitErr == nil
		})
		if visitErr != nil || err != nil || next <= from { // next <= from: nothing there any more
			return visitErr, err
		}
		from = next
	}
	return nil, nil
}

// ScanRanges lists the watermarks of alias's partitions (of *partition
// alone when not nil), asks plan which range of each to read (clipped to
// them), and calls visit with every record of those ranges as a consumer
// at iso sees them: in offset order within a partition, unordered across
// partitions; visit must copy what it keeps. Errors are Stream's; visit's
// error ends the scan and is returned wrapped.
func (r *Reader) ScanRanges(ctx context.Context, alias string, partition *int32, iso Isolation, plan func(map[int32]Marks) map[int32]Range, visit func(*kgo.Record) error) error {
	return r.scan(ctx, "scan", false, alias, partition, iso, plan, visit)
}

// scan is ScanRanges; op names the read in errors, and whole bounds all
// its broker calls together by the deadline instead of each one.
func (r *Reader) scan(ctx context.Context, op string, whole bool, alias string, partition *int32, iso Isolation, plan func(map[int32]Marks) map[int32]Range, visit func(*kgo.Record) error) error {
	a, err := r.resolve(alias)
	if err != nil {
		return err
	}
	opCtx := ctx // what each broker call's deadline is set under
	if whole {
		var cancel context.CancelFunc
		opCtx, cancel = context.WithTimeout(ctx, r.deadline)
		defer cancel()
	}
	sizer := newFetchSizer(fetchMax(a))
	cl, adm, err := r.newClient(a, iso, sizer.opts()...)
	if err != nil {
		return err
	}
	defer cl.Close()

	listCtx, cancel := context.WithTimeout(opCtx, r.deadline)
	lows, err := listAll(listCtx, adm.ListStartOffsets, a)
	var highs map[int32]int64
	if err == nil {
		highs, err = listAll(listCtx, iso.endOffsets(adm), a)
	}
	if err != nil {
		err = classify(ctx, listCtx, op, alias, err)
	}
	cancel()
	if err != nil {
		return err
	}
	marks := make(map[int32]Marks, len(highs))
	for p, high := range highs {
		if partition == nil || p == *partition {
			marks[p] = Marks{Low: min(lows[p], high), High: high}
		}
	}
	if partition != nil && len(marks) == 0 {
		return fmt.Errorf("alias '%s' partition %d: %w", alias, *partition, ErrUnknownPartition)
	}
	open := map[int32]Range{}
	assign := map[int32]kgo.Offset{}
	pos := map[int32]int64{} // where each partition's range was read up to
	for p, rg := range plan(marks) {
		m, ok := marks[p]
		rg.From, rg.To = max(rg.From, m.Low), min(rg.To, m.High)
		if ok && rg.From < rg.To {
			open[p], pos[p] = rg, rg.From
			assign[p] = kgo.NewOffset().At(rg.From)
		}
	}
	if len(open) == 0 {
		return nil
	}
	cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{a.Topic: assign})
	ref := newRefetcher(cl, a.Topic, iso, nil)
	poll := func() error {
		pollCtx, cancel := context.WithTimeout(opCtx, r.deadline)
		defer cancel()
		fetches := cl.PollFetches(pollCtx)
		if ctx.Err() != nil {
			return fmt.Errorf("%s alias '%s': %w", op, alias, ctx.Err())
		}
		var done []int32
		var visitErr error
		fetches.EachPartition(func(fp kgo.FetchTopicPartition) {
			rg, ok := open[fp.Partition]
			if !ok || visitErr != nil {
				return
			}
			for _, rec := range fp.Records {
				if rec.Offset < rg.From {
					continue
				}
				if rec.Offset >= rg.To {
					break
				}
				pos[fp.Partition] = rec.Offset + 1
				if !rec.Attrs.IsControl() { // a transaction marker is no readable record
					if visitErr = visit(rec); visitErr != nil {
						return
					}
				}
			}
			// Done once the last record seen reached or passed the end
			// (a compacted tail skips past To).
			if n := len(fp.Records); n > 0 && fp.Records[n-1].Offset+1 >= rg.To {
				delete(open, fp.Partition)
				done = append(done, fp.Partition)
			}
		})
		// A partition whose batches are too large to decompress whole is
		// read to its range's end by the refetcher.
		for _, fe := range fetches.Errors() {
			rg, ok := open[fe.Partition]
			if !ok || !kconn.IsLargeBatch(fe.Err) || visitErr != nil {
				continue
			}
			cl.RemoveConsumePartitions(map[string][]int32{a.Topic: {fe.Partition}})
			delete(open, fe.Partition)
			var err error
			if visitErr, err = scanStreamed(pollCtx, ref, fe.Partition, pos[fe.Partition], rg.To, visit); err != nil {
				return classify(ctx, pollCtx, op, alias, err)
			}
		}
		if visitErr != nil {
			return fmt.Errorf("%s alias '%s': %w", op, alias, visitErr)
		}
		if len(done) > 0 {
			cl.RemoveConsumePartitions(map[string][]int32{a.Topic: done})
		}
		if err := fetchErr(fetches); err != nil && len(open) > 0 {
			return classify(ctx, pollCtx, op, alias, err)
		}
		return nil
	}
	for len(open) > 0 {
		if err := poll(); err != nil {
			return err
		}
		sizer.resize(cl, fetchBudget)
	}
	return nil
}
