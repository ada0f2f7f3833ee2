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
	var out *Record
	var outside *OutOfRangeError
	high, next := int64(0), int64(-1) // next: the first offset shown at or after offset
	err := r.scan(ctx, "read", true, alias, &partition, iso, func(m map[int32]Marks) map[int32]Range {
		mk := m[partition]
		high = mk.High
		if offset < mk.Low || offset >= mk.High {
			outside = &OutOfRangeError{Alias: alias, Partition: partition, Offset: offset, Low: mk.Low, High: mk.High, Isolation: iso}
			return nil
		}
		return map[int32]Range{partition: {From: offset, To: mk.High}}
	}, func(rec *kgo.Record) error {
		if next = rec.Offset; next == offset {
			rec := newRecord(alias, rec) // a copy: the client's buffers go with it
			out = &rec
		}
		return errFound
	})
	switch {
	case err != nil && !errors.Is(err, errFound):
		return Record{}, err
	case outside != nil:
		return Record{}, outside
	case out != nil:
		return *out, nil
	case next < 0:
		next = high
	}
	return Record{}, &GoneError{Alias: alias, Partition: partition, Offset: offset, Next: next, Isolation: iso}
}

// errFound ends Message's scan at the first record shown.
var errFound = errors.New("found")

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
