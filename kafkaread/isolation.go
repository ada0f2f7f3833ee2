package kafkaread

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Isolation is which records of transactions a read shows. The zero value
// is ReadUncommitted.
type Isolation int8

const (
	// ReadUncommitted shows every record up to the high watermark, those
	// of aborted and of still open transactions included (a read_uncommitted
	// consumer's view, and an at-least-once pipeline's own).
	ReadUncommitted Isolation = iota
	// ReadCommitted shows what a read_committed consumer sees: records of
	// aborted transactions are left out, and a read ends at the last
	// stable offset, before the first record of the oldest open
	// transaction, so records of open transactions appear once committed.
	//
	// One end cannot be seen: when a partition's records just below its
	// last stable offset all belong to aborted transactions (possible
	// only while another producer's transaction there is open), the
	// client drops them and delivers nothing that reaches the end, so the
	// read waits until its deadline (ErrBrokerTimeout). kgo does not show
	// a partition's fetch position otherwise.
	ReadCommitted
)

// String is the isolation's name as the API takes and shows it.
func (i Isolation) String() string {
	if i == ReadCommitted {
		return "read_committed"
	}
	return "read_uncommitted"
}

// MarshalText writes String.
func (i Isolation) MarshalText() ([]byte, error) { return []byte(i.String()), nil }

// UnmarshalText reads a name ParseIsolation accepts.
func (i *Isolation) UnmarshalText(b []byte) error {
	v, ok := ParseIsolation(string(b))
	if !ok {
		return fmt.Errorf("isolation %q: want read_uncommitted or read_committed: %w", b, ErrBadQuery)
	}
	*i = v
	return nil
}

// ParseIsolation reads "read_uncommitted" or "read_committed".
func ParseIsolation(s string) (Isolation, bool) {
	switch s {
	case "read_uncommitted":
		return ReadUncommitted, true
	case "read_committed":
		return ReadCommitted, true
	}
	return ReadUncommitted, false
}

// fetchOpts are the client options that make its fetches read at i.
// Every read builds its own client, so an isolation never outlives the
// read that asked for it.
func (i Isolation) fetchOpts() []kgo.Opt {
	if i == ReadCommitted {
		return []kgo.Opt{kgo.FetchIsolationLevel(kgo.ReadCommitted())}
	}
	return nil
}

// endOffsets is the listing of where a read at i ends: the high
// watermark, or under ReadCommitted the last stable offset (ListOffsets
// with isolation level 1), which is as far as a read_committed fetch
// goes. A read that waited for records past it would wait for a
// transaction to end.
func (i Isolation) endOffsets(adm *kadm.Client) func(context.Context, ...string) (kadm.ListedOffsets, error) {
	if i == ReadCommitted {
		return adm.ListCommittedOffsets
	}
	return adm.ListEndOffsets
}
