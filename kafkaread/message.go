package kafkaread

import (
	"context"
	"errors"
	"fmt"

	"svc/worker/kconn"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Message reads the record at partition/offset of alias as a consumer at
// iso sees it. Errors: ErrUnknownAlias, *UnavailableError,
// ErrUnknownPartition, *OutOfRangeError, *GoneError, ErrBrokerTimeout
// (past the Reader's deadline, for all calls together), ErrBrokerFailure.
func (r *Reader) Message(ctx context.Context, alias string, partition int32, offset int64, iso Isolation) (Record, error) {
	a, err := r.resolve(alias)
	if err != nil {
		return Record{}, err
	}
	opCtx, cancel := context.WithTimeout(ctx, r.deadline)
	defer cancel()
	cl, adm, err := r.newClient(a, iso)
	if err != nil {
		return Record{}, err
	}
	defer cl.Close()

	fail := func(err error) error { return classify(ctx, opCtx, "read", alias, err) }
	low, err := listOffsets(opCtx, adm.ListStartOffsets, a, partition)
	if err != nil {
		return Record{}, fail(err)
	}
	high, err := listOffsets(opCtx, iso.endOffsets(adm), a, partition)
	if err != nil {
		return Record{}, fail(err)
	}
	if offset < low || offset >= high {
		return Record{}, &OutOfRangeError{Alias: alias, Partition: partition, Offset: offset, Low: low, High: high, Isolation: iso}
	}

	cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{a.Topic: {partition: kgo.NewOffset().At(offset)}})
	for {
		fetches := cl.PollFetches(opCtx)
		if err := fetchErr(fetches); err != nil {
			return Record{}, fail(err)
		}
		for _, fe := range fetches.Errors() {
			if kconn.IsLargeBatch(fe.Err) { // read as a stream, up to the record
				cl.RemoveConsumePartitions(map[string][]int32{a.Topic: {partition}})
				return r.messageStreamed(opCtx, fail, alias, newRefetcher(cl, a.Topic, iso, nil), partition, offset, high, iso)
			}
		}
		for it := fetches.RecordIter(); !it.Done(); {
			rec := it.Next()
			if rec.Partition != partition || rec.Offset < offset {
				continue
			}
			if rec.Attrs.IsControl() { // a transaction marker is no readable record
				if rec.Offset+1 >= high {
					return Record{}, &GoneError{Alias: alias, Partition: partition, Offset: offset, Next: high, Isolation: iso}
				}
				continue
			}
			if rec.Offset > offset {
				return Record{}, &GoneError{Alias: alias, Partition: partition, Offset: offset, Next: rec.Offset, Isolation: iso}
			}
			return newRecord(alias, rec), nil // a copy: the client's buffers go with it
		}
	}
}

// messageStreamed is Message for a record whose batch is too large to
// decompress whole.
func (r *Reader) messageStreamed(ctx context.Context, fail func(error) error, alias string, ref *refetcher, partition int32, offset, high int64, iso Isolation) (Record, error) {
	var out *Record
	gone := high
	next, err := ref.records(ctx, partition, offset, fetchBudget, func(rec *kgo.Record) bool {
		if rec.Offset == offset {
			rec := newRecord(alias, rec)
			out = &rec
		} else {
			gone = rec.Offset
		}
		return false
	})
	if err != nil {
		return Record{}, fail(err)
	}
	if out != nil {
		return *out, nil
	}
	if gone == high && next > offset {
		gone = min(next, high)
	}
	return Record{}, &GoneError{Alias: alias, Partition: partition, Offset: offset, Next: gone, Isolation: iso}
}

// listOffsets is listAll's offset of one partition (ErrUnknownPartition).
func listOffsets(ctx context.Context, list func(context.Context, ...string) (kadm.ListedOffsets, error), a AliasSpec, partition int32) (int64, error) {
	all, err := listAll(ctx, list, a)
	if err != nil {
		return 0, err
	}
	o, ok := all[partition]
	if !ok {
		return 0, fmt.Errorf("alias '%s' partition %d: %w", a.Name, partition, ErrUnknownPartition)
	}
	return o, nil
}

// listAll runs one kadm offset listing of a's topic; a missing topic makes
// the alias unavailable.
func listAll(ctx context.Context, list func(context.Context, ...string) (kadm.ListedOffsets, error), a AliasSpec) (map[int32]int64, error) {
	listed, err := list(ctx, a.Topic)
	if err == nil {
		err = listed.Error()
	}
	if errors.Is(err, kerr.UnknownTopicOrPartition) {
		return nil, &UnavailableError{Alias: a.Name, Detail: fmt.Sprintf("alias '%s' is not available: its topic does not exist", a.Name)}
	}
	if err != nil {
		return nil, err
	}
	out := make(map[int32]int64, len(listed[a.Topic]))
	for p, o := range listed[a.Topic] {
		out[p] = o.Offset
	}
	return out, nil
}

// fetchErr returns the first fetch error that ends a read: data loss (the
// client moved on), deferred and large batches do not.
func fetchErr(fetches kgo.Fetches) error {
	for _, fe := range fetches.Errors() {
		var loss *kgo.ErrDataLoss
		if errors.As(fe.Err, &loss) || kconn.IsWindowFull(fe.Err) || kconn.IsLargeBatch(fe.Err) {
			continue
		}
		return fe.Err
	}
	return nil
}
