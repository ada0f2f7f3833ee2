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
	// ReadUncommitted shows every record up to the high watermark.
	ReadUncommitted Isolation = iota
	// ReadCommitted shows what a read_committed consumer sees: no aborted
	// records, and reads end at the last stable offset. When the records
	// just below it are all aborted, a read waits until its deadline
	// (kgo shows no fetch position otherwise).
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
func (i Isolation) fetchOpts() []kgo.Opt {
	if i == ReadCommitted {
		return []kgo.Opt{kgo.FetchIsolationLevel(kgo.ReadCommitted())}
	}
	return nil
}

// endOffsets lists where a read at i ends: the high watermark, or under
// ReadCommitted the last stable offset.
func (i Isolation) endOffsets(adm *kadm.Client) func(context.Context, ...string) (kadm.ListedOffsets, error) {
	if i == ReadCommitted {
		return adm.ListCommittedOffsets
	}
	return adm.ListEndOffsets
}
