package kafkaread

import (
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Until a stream has read a batch, fetchSizer assumes its batches inflate
// this much.
const initialInflation = 4

// fetchSizer keeps one fetch of a stream within fetchBudget decompressed:
// brokers count stored bytes, so it learns the batches' inflation from
// kgo's batch-read hook and asks for that much less.
type fetchSizer struct {
	wire, raw atomic.Int64 // batch bytes read and decompressed since the last resize
	read      atomic.Int64 // decompressed bytes read over the stream (benchmarks)
	limit     int32        // the fetch size before inflation (fetchMax)
	// Used by the stream's goroutine only.
	inflation             float64
	fetchBytes, partBytes int32 // as last set
}

func newFetchSizer(fetchMax int32) *fetchSizer {
	f := &fetchSizer{limit: fetchMax, inflation: initialInflation}
	f.fetchBytes, f.partBytes = f.deflate(int(fetchMax)), f.deflate(int(fetchMax))
	return f
}

// OnFetchBatchRead implements kgo.HookFetchBatchRead; kgo calls it from
// its own goroutines.
func (f *fetchSizer) OnFetchBatchRead(_ kgo.BrokerMetadata, _ string, _ int32, m kgo.FetchBatchMetrics) {
	f.wire.Add(int64(m.CompressedBytes))
	f.raw.Add(int64(m.UncompressedBytes))
	f.read.Add(int64(m.UncompressedBytes))
}

// opts are the client options of the first fetches, made before any batch
// was seen.
func (f *fetchSizer) opts() []kgo.Opt {
	return []kgo.Opt{kgo.WithHooks(f), kgo.FetchMaxBytes(f.fetchBytes), kgo.FetchMaxPartitionBytes(f.partBytes)}
}

// deflate is how many stored bytes inflate to about n, within [1, limit].
func (f *fetchSizer) deflate(n int) int32 {
	return int32(min(max(float64(n)/f.inflation, 1), float64(f.limit)))
}

// resize sets the next fetches' sizes from the inflation seen since the
// last call, for partitions that may each queue share bytes.
func (f *fetchSizer) resize(cl *kgo.Client, share int) {
	if wire, raw := f.wire.Swap(0), f.raw.Swap(0); wire > 0 {
		f.inflation = max(float64(raw)/float64(wire), 1)
	}
	fetchBytes := f.deflate(int(f.limit))
	partBytes := min(f.deflate(share), fetchBytes)
	if fetchBytes != f.fetchBytes || partBytes != f.partBytes {
		f.fetchBytes, f.partBytes = fetchBytes, partBytes
		cl.UpdateFetchMaxBytes(fetchBytes, partBytes)
	}
}
