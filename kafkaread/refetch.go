package kafkaread

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"slices"
	"time"

	"svc/worker/kconn"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// refetcher reads records with its own fetch requests, each batch
// decompressed as a stream: stand-ins read again (merger.fill) and
// partitions whose batches are too large to decompress whole. It borrows
// the read's client for its connections.
type refetcher struct {
	cl    *kgo.Client
	topic string
	iso   Isolation
	dec   *kconn.Decompressor
	read  func(kgo.FetchBatchMetrics) // called for each batch read (the sizer's count), may be nil

	topicID [16]byte
	leaders map[int32]int32 // nil: to be listed
}

func newRefetcher(cl *kgo.Client, topic string, iso Isolation, read func(kgo.FetchBatchMetrics)) *refetcher {
	return &refetcher{cl: cl, topic: topic, iso: iso, dec: kconn.NewDecompressor(MaxReadBatchBytes, 0), read: read}
}

// records fetches partition p from offset on (at most maxBytes stored; 1:
// the batch holding offset) and calls each with the records f.iso shows,
// in order, until each returns false (not taken) or the fetch ends; their
// bytes are valid during the call only. next is where to read on (offset
// when nothing is there any more).
func (f *refetcher) records(ctx context.Context, p int32, offset int64, maxBytes int32, each func(*kgo.Record) bool) (next int64, err error) {
	next = offset
	rp, err := f.fetch(ctx, p, offset, maxBytes)
	if err != nil || rp == nil {
		return next, err
	}
	// Under read_committed a producer's batches from each aborted first
	// offset up to its next transaction marker are skipped.
	aborted := map[int64][]int64{}
	if f.iso == ReadCommitted {
		for _, a := range rp.AbortedTransactions {
			aborted[a.ProducerID] = append(aborted[a.ProducerID], a.FirstOffset)
		}
		for _, offs := range aborted {
			slices.Sort(offs)
		}
	}
	var buf []byte
	for in := rp.RecordBatches; len(in) > 17; {
		length := int64(binary.BigEndian.Uint32(in[8:])) + 12
		if length > int64(len(in)) || in[16] != 2 {
			return next, nil // a partial batch ends a response; old message formats are not read here
		}
		var batch kmsg.RecordBatch
		raw := in[:length]
		in = in[length:]
		if err := batch.ReadFrom(raw); err != nil {
			return next, fmt.Errorf("partition %d: the batch at offset %d does not parse: %w", p, batch.FirstOffset, err)
		}
		if int32(crc32.Checksum(raw[21:], crc32c)) != batch.CRC {
			return next, fmt.Errorf("partition %d: the batch at offset %d fails its CRC", p, batch.FirstOffset)
		}
		last := batch.FirstOffset + int64(batch.LastOffsetDelta)
		if last < offset {
			continue
		}
		offs := aborted[batch.ProducerID]
		switch {
		case batch.Attributes&0x20 != 0: // transaction markers: the end of a transaction
			if len(offs) > 0 && offs[0] <= batch.FirstOffset {
				aborted[batch.ProducerID] = offs[1:]
			}
		case batch.Attributes&0x10 != 0 && len(offs) > 0 && offs[0] <= batch.FirstOffset: // aborted
		default:
			more, err := f.batch(p, &batch, offset, &buf, each, &next)
			if err != nil {
				var tl *kgo.ErrDecompressTooLarge
				if errors.Is(err, kgo.ErrMaxDecompress) && !errors.As(err, &tl) {
					err = &kgo.ErrDecompressTooLarge{Topic: f.topic, Partition: p, Offset: batch.FirstOffset, Epoch: batch.PartitionLeaderEpoch, NextOffset: last + 1}
				}
				return next, err
			}
			if !more {
				return next, nil
			}
		}
		next = max(next, last+1)
	}
	return next, nil
}

var crc32c = crc32.MakeTable(crc32.Castagnoli)

// batch streams the records of batch from offset on to each, moving next
// past each record taken; false: each stopped.
func (f *refetcher) batch(p int32, batch *kmsg.RecordBatch, offset int64, buf *[]byte, each func(*kgo.Record) bool, next *int64) (bool, error) {
	r, release, err := f.dec.Reader(batch.Records, kgo.CompressionCodecType(batch.Attributes&0x07))
	if err != nil {
		return false, err
	}
	defer release()
	br := bufio.NewReaderSize(r, 32<<10)
	read := 0
	defer func() {
		if f.read != nil {
			f.read(kgo.FetchBatchMetrics{NumRecords: int(batch.NumRecords), CompressedBytes: len(batch.Records), UncompressedBytes: read})
		}
	}()
	for range batch.NumRecords {
		n, err := binary.ReadVarint(br)
		if err != nil {
			return false, fmt.Errorf("partition %d: a record of the batch at offset %d: %w", p, batch.FirstOffset, err)
		}
		if n > int64(f.dec.MaxBatch()) {
			return false, fmt.Errorf("partition %d: a record of %d bytes: %w", p, n, kgo.ErrMaxDecompress)
		}
		if n < 0 {
			return false, fmt.Errorf("partition %d: a record of the batch at offset %d has length %d", p, batch.FirstOffset, n)
		}
		b := binary.AppendVarint((*buf)[:0], n)
		h := len(b)
		b = slices.Grow(b, int(n))[:h+int(n)]
		*buf = b
		if _, err := io.ReadFull(br, b[h:]); err != nil {
			return false, fmt.Errorf("partition %d: a record of the batch at offset %d: %w", p, batch.FirstOffset, err)
		}
		read += len(b)
		var kr kmsg.Record
		if err := kr.ReadFrom(b); err != nil {
			return false, fmt.Errorf("partition %d: a record of the batch at offset %d does not parse: %w", p, batch.FirstOffset, err)
		}
		o := batch.FirstOffset + int64(kr.OffsetDelta)
		if o < offset {
			continue
		}
		ts := batch.FirstTimestamp + kr.TimestampDelta64
		if batch.Attributes&0x08 != 0 { // log append time
			ts = batch.MaxTimestamp
		}
		rec := &kgo.Record{Topic: f.topic, Partition: p, Offset: o, Timestamp: time.UnixMilli(ts), Key: kr.Key, Value: kr.Value,
			LeaderEpoch: batch.PartitionLeaderEpoch, ProducerID: batch.ProducerID, ProducerEpoch: batch.ProducerEpoch}
		if len(kr.Headers) > 0 {
			rec.Headers = make([]kgo.RecordHeader, len(kr.Headers))
			for i, h := range kr.Headers {
				rec.Headers[i] = kgo.RecordHeader{Key: h.Key, Value: h.Value}
			}
		}
		if !each(rec) {
			*next = o
			return false, nil
		}
		*next = o + 1
	}
	return true, nil
}

// maxRetries bounds the attempts of one fetch after retriable errors.
const maxRetries = 3

// fetch sends one fetch of partition p at offset, of at most maxBytes as
// stored, to its leader, listing the leaders again (at most maxRetries
// times) when it moved. nil, nil: the offset is out of range.
func (f *refetcher) fetch(ctx context.Context, p int32, offset int64, maxBytes int32) (*kmsg.FetchResponseTopicPartition, error) {
	for attempt := 0; ; attempt++ {
		if f.leaders == nil {
			if err := f.listLeaders(ctx); err != nil {
				return nil, err
			}
		}
		leader, ok := f.leaders[p]
		if !ok {
			return nil, fmt.Errorf("partition %d: %w", p, ErrUnknownPartition)
		}
		req := kmsg.NewPtrFetchRequest()
		req.MaxWaitMillis = 0
		req.MinBytes = 0
		req.MaxBytes = maxBytes
		if f.iso == ReadCommitted {
			req.IsolationLevel = 1
		}
		t := kmsg.NewFetchRequestTopic()
		t.Topic, t.TopicID = f.topic, f.topicID
		pt := kmsg.NewFetchRequestTopicPartition()
		pt.Partition, pt.FetchOffset, pt.PartitionMaxBytes = p, offset, maxBytes
		t.Partitions = append(t.Partitions, pt)
		req.Topics = append(req.Topics, t)
		resp, err := req.RequestWith(ctx, f.cl.Broker(int(leader)))
		if err != nil {
			// A connection replaced meanwhile: retry on a new one.
			if attempt >= maxRetries || !kgo.IsRetryableBrokerErr(err) {
				return nil, err
			}
			f.leaders = nil
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(50 * time.Millisecond << attempt):
			}
			continue
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			return nil, err
		}
		var rp *kmsg.FetchResponseTopicPartition
		for i := range resp.Topics {
			for j := range resp.Topics[i].Partitions {
				if resp.Topics[i].Partitions[j].Partition == p {
					rp = &resp.Topics[i].Partitions[j]
				}
			}
		}
		if rp == nil {
			return nil, fmt.Errorf("partition %d: the broker's fetch response does not hold it", p)
		}
		err = kerr.ErrorForCode(rp.ErrorCode)
		switch {
		case err == nil:
			return rp, nil
		case errors.Is(err, kerr.OffsetOutOfRange):
			return nil, nil
		case attempt < maxRetries && kerr.IsRetriable(err):
			f.leaders = nil
		default:
			return nil, err
		}
	}
}

// listLeaders lists the topic's id and its partitions' leaders.
func (f *refetcher) listLeaders(ctx context.Context) error {
	req := kmsg.NewPtrMetadataRequest()
	t := kmsg.NewMetadataRequestTopic()
	t.Topic = kmsg.StringPtr(f.topic)
	req.Topics = append(req.Topics, t)
	resp, err := req.RequestWith(ctx, f.cl)
	if err != nil {
		return err
	}
	for _, rt := range resp.Topics {
		if rt.Topic == nil || *rt.Topic != f.topic {
			continue
		}
		if err := kerr.ErrorForCode(rt.ErrorCode); err != nil {
			return err
		}
		f.topicID = rt.TopicID
		f.leaders = make(map[int32]int32, len(rt.Partitions))
		for _, p := range rt.Partitions {
			f.leaders[p.Partition] = p.Leader
		}
		return nil
	}
	return errors.New("the brokers' metadata does not list the topic")
}
