package kafkaread

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Every error text of this package is fit to serve as a response detail:
// it names the alias, never a topic or broker (franz-go causes stay
// reachable through errors.Unwrap only).

var (
	// ErrNotFound is matched by every "no such thing" error.
	ErrNotFound = errors.New("not found")
	// ErrUnknownAlias means no alias of that name is configured.
	ErrUnknownAlias error = notFound("unknown alias")
	// ErrUnknownPartition means the alias's topic has no such partition.
	ErrUnknownPartition error = notFound("unknown partition")
	// ErrBadQuery means a query parameter is missing or malformed.
	ErrBadQuery = errors.New("bad query")
	// ErrBrokerTimeout means the brokers did not answer before the deadline.
	ErrBrokerTimeout = errors.New("kafka brokers did not answer before the deadline")
	// ErrBrokerFailure means a broker answered with an error or the
	// connection failed.
	ErrBrokerFailure = errors.New("kafka read failed")
	// ErrTooLarge is matched by *BatchTooLargeError.
	ErrTooLarge = errors.New("batch too large to read")
)

// BatchTooLargeError is a batch that decompresses to more than
// MaxReadBatchBytes: offsets From to Next-1 cannot be read here.
type BatchTooLargeError struct {
	Alias     string
	Partition int32
	From      int64 // the batch's first offset
	Next      int64 // the offset after its last record
	Bound     int
}

// Error names the batch's offsets, the bound and where reading may go on.
func (e *BatchTooLargeError) Error() string {
	return fmt.Sprintf("alias '%s' partition %d: the batch of offsets %d-%d decompresses to more than %d MiB, the most a read decompresses at once; its records cannot be read here (the next offset readable is %d)",
		e.Alias, e.Partition, e.From, e.Next-1, e.Bound>>20, e.Next)
}

// Is matches ErrTooLarge.
func (e *BatchTooLargeError) Is(target error) bool { return target == ErrTooLarge }

// notFound is a sentinel that also matches ErrNotFound.
type notFound string

func (e notFound) Error() string        { return string(e) }
func (e notFound) Is(target error) bool { return target == ErrNotFound }

// UnavailableError is a configured alias that cannot be read.
type UnavailableError struct {
	Alias  string
	Detail string
}

// Error returns Detail.
func (e *UnavailableError) Error() string { return e.Detail }

// Is matches ErrNotFound.
func (e *UnavailableError) Is(target error) bool { return target == ErrNotFound }

// OutOfRangeError is an offset outside the partition's current
// [Low, High) (High: the last stable offset under ReadCommitted).
type OutOfRangeError struct {
	Alias     string
	Partition int32
	Offset    int64
	Low, High int64
	Isolation Isolation
}

// Error names the offset and the partition's current range.
func (e *OutOfRangeError) Error() string {
	msg := fmt.Sprintf("offset %d is outside partition %d's range [%d, %d)", e.Offset, e.Partition, e.Low, e.High)
	if e.Isolation == ReadCommitted && e.Offset >= e.High {
		msg += " (read_committed reads end at the last stable offset, before any open transaction)"
	}
	return msg
}

// Is matches ErrNotFound.
func (e *OutOfRangeError) Is(target error) bool { return target == ErrNotFound }

// GoneError is an offset inside the watermarks whose record was deleted,
// compacted, is a transaction marker or (ReadCommitted) was aborted. Next
// is the next offset a read shows, else the end.
type GoneError struct {
	Alias     string
	Partition int32
	Offset    int64
	Next      int64
	Isolation Isolation
}

// Error names the offset and the next surviving one.
func (e *GoneError) Error() string {
	if e.Isolation == ReadCommitted {
		return fmt.Sprintf("offset %d in partition %d is not shown under read_committed (a record of an aborted transaction, a transaction marker, or deleted or compacted); the next offset shown is %d", e.Offset, e.Partition, e.Next)
	}
	return fmt.Sprintf("offset %d in partition %d was deleted or compacted; the next surviving offset is %d", e.Offset, e.Partition, e.Next)
}

// Is matches ErrNotFound.
func (e *GoneError) Is(target error) bool { return target == ErrNotFound }

// brokerError is a broker timeout or failure, unwrapping to both causes.
type brokerError struct {
	op, alias string
	kind      error // ErrBrokerTimeout or ErrBrokerFailure
	cause     error
}

func (e *brokerError) Error() string {
	msg := fmt.Sprintf("%s alias '%s': %v", e.op, e.alias, e.kind)
	var ke *kerr.Error
	var ne net.Error
	var ce *tls.CertificateVerificationError
	switch {
	case e.kind == ErrBrokerTimeout:
	case errors.As(e.cause, &ke):
		msg += " (" + ke.Message + ")"
	case errors.As(e.cause, &ce):
		msg += " (TLS certificate verification failed)"
	case errors.As(e.cause, &ne), errors.Is(e.cause, io.EOF):
		msg += " (connection failed)"
	}
	return msg
}

func (e *brokerError) Unwrap() []error { return []error{e.kind, e.cause} }

// classify turns a franz-go error seen during op into this package's:
// its own errors and the caller's cancellation pass through, an expired
// opCtx is a timeout, anything else a broker failure.
func classify(ctx, opCtx context.Context, op, alias string, err error) error {
	if errors.Is(err, ErrNotFound) || errors.Is(err, ErrBadQuery) || errors.Is(err, ErrTooLarge) {
		return err // already one of ours
	}
	if tl, ok := errors.AsType[*kgo.ErrDecompressTooLarge](err); ok {
		return &BatchTooLargeError{Alias: alias, Partition: tl.Partition, From: tl.Offset, Next: tl.NextOffset, Bound: MaxReadBatchBytes}
	}
	if ctx.Err() != nil {
		return fmt.Errorf("%s alias '%s': %w", op, alias, ctx.Err())
	}
	if opCtx.Err() != nil || errors.Is(err, context.DeadlineExceeded) {
		return &brokerError{op: op, alias: alias, kind: ErrBrokerTimeout, cause: err}
	}
	return &brokerError{op: op, alias: alias, kind: ErrBrokerFailure, cause: err}
}
