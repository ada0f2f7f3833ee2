package kconn

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ErrWindowFull refuses a batch past its fetch response's budget (Window):
// the client fetches it again later, and consumers skip the error.
var ErrWindowFull = errors.New("the fetch's decompression budget is spent; the batch is read by a later fetch")

// ErrLargeBatch refuses a batch over StreamAbove: the caller reads it as
// a stream instead (Reader).
var ErrLargeBatch = errors.New("the batch is larger than the client decompresses whole; it is read as a stream")

// IsWindowFull reports a fetch error that only defers a batch.
func IsWindowFull(err error) bool { return errors.Is(err, ErrWindowFull) }

// IsLargeBatch reports a fetch error for a batch to read as a stream.
func IsLargeBatch(err error) bool { return errors.Is(err, ErrLargeBatch) }

// Decompressor decompresses the batches a consuming client fetches
// (kgo.WithDecompressor) within two bounds, whatever the codec:
//
//   - MaxBatch: a batch that decompresses to more is refused with
//     kgo.ErrMaxDecompress, before anything is allocated when the batch
//     states its size, after at most MaxBatch bytes otherwise (the client
//     reports *kgo.ErrDecompressTooLarge for the partition).
//   - Window: what one fetch response may decompress beyond its first
//     batch (compressed batches inflate without limit). A batch past it
//     is refused with ErrWindowFull and fetched again later, first of its
//     response; only one that does not state its size may be decoded up
//     to Window bytes before it is refused. Uncompressed batches count
//     against it too (kgo.HookFetchBatchRead), and are never refused.
//
// A new window opens when the client reads a fetch response
// (kgo.HookBrokerRead, installed by Opts).
type Decompressor struct {
	maxBatch, window int
	streamAbove      int // > 0: batches larger than this are refused with ErrLargeBatch
	perRecord        int // counted against the window for each record decompressed

	mu   sync.Mutex
	used int // decompressed in the current window

	decompressed atomic.Int64 // bytes decompressed over the client's life
	batches      atomic.Int64 // batches decompressed
	deferred     atomic.Int64 // batches refused with ErrWindowFull
	tooLarge     atomic.Int64 // batches refused over MaxBatch

	zstd, gz, lz *sync.Pool
}

// Decoders are shared by every Decompressor of the process (a read builds
// one per request, and an lz4 reader holds blocks of up to 4 MiB); zstd
// decoders carry their bound, so they are pooled per MaxBatch.
var (
	gzReaders  = &sync.Pool{New: func() any { return new(gzip.Reader) }}
	lz4Readers = &sync.Pool{New: func() any { return lz4.NewReader(nil) }}

	zstdMu    sync.Mutex
	zstdPools = map[int]*sync.Pool{}
)

// zstdDecoders is the pool of zstd decoders bounded at maxBatch.
func zstdDecoders(maxBatch int) *sync.Pool {
	zstdMu.Lock()
	defer zstdMu.Unlock()
	p := zstdPools[maxBatch]
	if p == nil {
		p = &sync.Pool{New: func() any {
			dec, _ := zstd.NewReader(nil,
				zstd.WithDecoderLowmem(true),
				zstd.WithDecoderConcurrency(1),
				zstd.WithDecoderMaxMemory(uint64(maxBatch)),
				zstd.WithDecoderMaxWindow(uint64(max(maxBatch, zstd.MinWindowSize))),
			)
			z := &zstdDec{dec}
			runtime.SetFinalizer(z, func(z *zstdDec) { z.Close() })
			return z
		}}
		zstdPools[maxBatch] = p
	}
	return p
}

// NewDecompressor returns a Decompressor for batches of at most maxBatch
// bytes decompressed and fetch responses of window bytes beyond their
// first batch.
func NewDecompressor(maxBatch, window int) *Decompressor {
	d := &Decompressor{maxBatch: maxBatch, window: window}
	d.zstd, d.gz, d.lz = zstdDecoders(maxBatch), gzReaders, lz4Readers
	return d
}

type zstdDec struct{ *zstd.Decoder }

// StreamAbove makes d refuse batches that decompress to more than n bytes
// with ErrLargeBatch, for a caller that reads those as streams (Reader);
// it returns d.
func (d *Decompressor) StreamAbove(n int) *Decompressor {
	d.streamAbove = n
	return d
}

// PerRecord makes d count n bytes against the window for each record a
// batch holds, beside its decompressed bytes: what a consumer keeps for a
// record beyond its bytes (the window then bounds the records' memory).
// A batch that fits only without them is deferred, unless first of its
// response. It returns d.
func (d *Decompressor) PerRecord(n int) *Decompressor {
	d.perRecord = n
	return d
}

// Opts are the client options that install d: the decompressor and the
// hook that opens its windows.
func (d *Decompressor) Opts() []kgo.Opt {
	return []kgo.Opt{kgo.WithDecompressor(d), kgo.WithHooks(d)}
}

// MaxBatch is the bound of one batch, decompressed.
func (d *Decompressor) MaxBatch() int { return d.maxBatch }

// Decompressed is the bytes d decompressed so far.
func (d *Decompressor) Decompressed() int64 { return d.decompressed.Load() }

// Batches is the number of batches d decompressed so far.
func (d *Decompressor) Batches() int64 { return d.batches.Load() }

// Deferred is the number of batches refused with ErrWindowFull so far.
func (d *Decompressor) Deferred() int64 { return d.deferred.Load() }

// TooLarge is the number of batches refused over MaxBatch so far.
func (d *Decompressor) TooLarge() int64 { return d.tooLarge.Load() }

// OnBrokerRead implements kgo.HookBrokerRead: a fetch response (read
// whole before any of its batches is decompressed) opens a new window.
func (d *Decompressor) OnBrokerRead(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if key != int16(kmsg.Fetch) || err != nil {
		return
	}
	d.mu.Lock()
	d.used = 0
	d.mu.Unlock()
}

// OnFetchBatchRead implements kgo.HookFetchBatchRead: the client never
// hands an uncompressed batch to Decompress, yet its records count
// against the window as a decompressed batch's do (it is not deferred:
// it is read already), so the compressed batches after it in the same
// response fit in what is left.
func (d *Decompressor) OnFetchBatchRead(_ kgo.BrokerMetadata, _ string, _ int32, m kgo.FetchBatchMetrics) {
	if m.CompressionType != 0 {
		return
	}
	d.mu.Lock()
	d.used += max(m.UncompressedBytes, 1) + m.NumRecords*d.perRecord
	d.mu.Unlock()
}

// limit is the most the next batch may decompress to.
func (d *Decompressor) limit() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.used == 0 {
		return d.batchCap()
	}
	return min(d.batchCap(), d.window-d.used)
}

// batchCap is the most one batch decompresses to whole.
func (d *Decompressor) batchCap() int {
	if d.streamAbove > 0 {
		return min(d.maxBatch, d.streamAbove)
	}
	return d.maxBatch
}

// errOver is the refusal of a batch over lim: over MaxBatch (or to be
// read as a stream), or only over what the window has left.
func (d *Decompressor) errOver(lim int) error {
	switch {
	case lim >= d.batchCap() && d.batchCap() < d.maxBatch:
		return ErrLargeBatch
	case lim >= d.maxBatch:
		return d.errTooLarge()
	}
	d.deferred.Add(1)
	return ErrWindowFull
}

// errTooLarge is the refusal of a batch over MaxBatch read as a stream.
func (d *Decompressor) errTooLarge() error {
	d.tooLarge.Add(1)
	return fmt.Errorf("%w (%d bytes)", kgo.ErrMaxDecompress, d.maxBatch)
}

// Decompress implements kgo.Decompressor.
func (d *Decompressor) Decompress(src []byte, codec kgo.CompressionCodecType) (out []byte, err error) {
	if codec == kgo.CodecNone {
		return src, nil
	}
	lim := d.limit()
	if lim <= 0 {
		return nil, d.errOver(lim)
	}
	// A stated size is checked again while decoding: a batch that lies is
	// refused there.
	n, stated := statedSize(src, codec)
	if stated && n > lim {
		return nil, d.errOver(lim)
	}
	switch {
	case codec == kgo.CodecSnappy:
		out, err = decodeSnappy(src, lim)
	case codec == kgo.CodecZstd && stated: // decoded in one call
		z := d.zstd.Get().(*zstdDec)
		out, err = z.DecodeAll(src, make([]byte, 0, n))
		d.zstd.Put(z)
		if err == nil && len(out) > lim {
			err = errOverLimit
		}
	default:
		var r io.Reader
		var release func()
		if r, release, err = d.stream(src, codec); err == nil {
			out, err = readLimited(r, lim)
			release()
		}
	}
	if zstdOver(err) || errors.Is(err, errOverLimit) {
		return nil, d.errOver(lim)
	}
	if err != nil {
		return nil, err
	}
	cost := max(len(out), 1)
	if d.perRecord > 0 {
		if cost += countRecords(out) * d.perRecord; cost > lim && lim < d.batchCap() {
			return nil, d.errOver(lim)
		}
	}
	d.mu.Lock()
	d.used += cost
	d.mu.Unlock()
	d.decompressed.Add(int64(len(out)))
	d.batches.Add(1)
	return out, nil
}

// countRecords counts the records of a decompressed batch: each is its
// length (a signed varint) and that many bytes.
func countRecords(b []byte) (n int) {
	for len(b) > 0 {
		l, k := binary.Varint(b)
		if k <= 0 || l <= 0 || l > int64(len(b)-k) { // a v2 record is never empty

			break
		}
		b, n = b[k+int(l):], n+1
	}
	return n
}

// errOverLimit is a decode that outgrew its limit.
var errOverLimit = errors.New("over the limit")

// readLimited reads r to its end, failing with errOverLimit past lim
// bytes.
func readLimited(r io.Reader, lim int) ([]byte, error) {
	var buf bytes.Buffer
	n, err := buf.ReadFrom(&io.LimitedReader{R: r, N: int64(lim) + 1})
	if err != nil {
		return nil, err
	}
	if n > int64(lim) {
		return nil, errOverLimit
	}
	return buf.Bytes(), nil
}

// zstdOver reports a zstd frame over the decoder's bound: its content, or
// the window it declares (a frame's window is at most its content, or an
// encoder's choice of history, which the decoder would have to hold).
func zstdOver(err error) bool {
	return errors.Is(err, zstd.ErrDecoderSizeExceeded) || errors.Is(err, zstd.ErrWindowSizeExceeded)
}

// xerialPrefix starts snappy batches framed the Java way (xerial).
var xerialPrefix = []byte{130, 83, 78, 65, 80, 80, 89, 0}

// decodeSnappy decodes a raw or xerial-framed snappy batch, whose blocks
// state their sizes: nothing is decoded past lim.
func decodeSnappy(src []byte, lim int) ([]byte, error) {
	blocks, n, ok := snappyBlocks(src)
	if !ok {
		return nil, errors.New("malformed snappy batch")
	}
	if n > lim {
		return nil, errOverLimit
	}
	out := make([]byte, 0, n)
	for _, block := range blocks {
		l, _ := s2.DecodedLen(block)
		got, err := s2.Decode(out[len(out):len(out)+l], block)
		if err != nil {
			return nil, err
		}
		out = out[:len(out)+len(got)]
	}
	return out, nil
}

// snappyBlocks splits a snappy batch into its blocks (itself when raw) and
// sums the sizes they state; ok is false when it is malformed.
func snappyBlocks(src []byte) (blocks [][]byte, n int, ok bool) {
	if !bytes.HasPrefix(src, xerialPrefix) || len(src) <= 16 {
		blocks = [][]byte{src}
	} else {
		for rest := src[16:]; len(rest) > 0; {
			if len(rest) < 4 || int64(binary.BigEndian.Uint32(rest)) > int64(len(rest)-4) {
				return nil, 0, false
			}
			size := int(binary.BigEndian.Uint32(rest))
			blocks = append(blocks, rest[4:4+size])
			rest = rest[4+size:]
		}
	}
	for _, block := range blocks {
		l, err := s2.DecodedLen(block)
		if err != nil {
			return nil, 0, false
		}
		n += l
	}
	return blocks, n, true
}

// statedSize is the decompressed size a batch states before it is
// decoded: a zstd frame's content size (of the first frame), snappy's
// block sizes, an lz4 frame's content size, a gzip member's size (modulo
// 2^32, of the last member: a hint used to defer a batch, never to accept
// one).
func statedSize(src []byte, codec kgo.CompressionCodecType) (int, bool) {
	switch codec {
	case kgo.CodecZstd:
		var h zstd.Header
		if h.Decode(src) == nil && h.HasFCS {
			return int(min(h.FrameContentSize, 1<<62)), true
		}
	case kgo.CodecSnappy:
		_, n, ok := snappyBlocks(src)
		return n, ok
	case kgo.CodecLz4:
		// Frame: magic, FLG (bit 3: content size present), BD, then
		// the 8-byte little-endian content size.
		if len(src) >= 14 && binary.LittleEndian.Uint32(src) == 0x184D2204 && src[4]&0x08 != 0 {
			return int(min(binary.LittleEndian.Uint64(src[6:]), 1<<62)), true
		}
	case kgo.CodecGzip:
		if len(src) >= 18 {
			return int(binary.LittleEndian.Uint32(src[len(src)-4:])), true
		}
	}
	return 0, false
}

// Reader returns src decompressed as a stream, for a caller that reads a
// batch's records one at a time: it holds the codec's window (and a
// snappy batch whole), not the batch. Reading past MaxBatch fails with
// kgo.ErrMaxDecompress. release hands the decoder back.
func (d *Decompressor) Reader(src []byte, codec kgo.CompressionCodecType) (r io.Reader, release func(), err error) {
	release = func() {}
	switch codec {
	case kgo.CodecNone:
		r = bytes.NewReader(src)
	case kgo.CodecSnappy:
		b, err := decodeSnappy(src, d.maxBatch)
		if errors.Is(err, errOverLimit) {
			return nil, release, d.errTooLarge()
		}
		if err != nil {
			return nil, release, err
		}
		r = bytes.NewReader(b)
	default:
		if r, release, err = d.stream(src, codec); err != nil {
			return nil, func() {}, err
		}
	}
	return &boundedReader{d: d, r: r, left: int64(d.maxBatch)}, release, nil
}

// stream is a pooled decoder reading src, for zstd, gzip and lz4.
func (d *Decompressor) stream(src []byte, codec kgo.CompressionCodecType) (io.Reader, func(), error) {
	switch codec {
	case kgo.CodecZstd:
		z := d.zstd.Get().(*zstdDec)
		if err := z.Reset(bytes.NewReader(src)); err != nil {
			d.zstd.Put(z)
			return nil, nil, err
		}
		return z, func() { _ = z.Reset(nil); d.zstd.Put(z) }, nil
	case kgo.CodecGzip:
		gz := d.gz.Get().(*gzip.Reader)
		if err := gz.Reset(bytes.NewReader(src)); err != nil {
			d.gz.Put(gz)
			return nil, nil, err
		}
		return gz, func() { d.gz.Put(gz) }, nil
	case kgo.CodecLz4:
		lz := d.lz.Get().(*lz4.Reader)
		lz.Reset(bytes.NewReader(src))
		return lz, func() { lz.Reset(nil); d.lz.Put(lz) }, nil
	}
	return nil, nil, errors.New("unknown compression codec")
}

// boundedReader fails past its Decompressor's MaxBatch and counts what
// it read as decompressed.
type boundedReader struct {
	d    *Decompressor
	r    io.Reader
	left int64
}

func (b *boundedReader) Read(p []byte) (int, error) {
	if b.left <= 0 {
		var one [1]byte
		if n, _ := b.r.Read(one[:]); n > 0 {
			return 0, b.d.errTooLarge()
		}
	}
	if int64(len(p)) > b.left {
		p = p[:max(b.left, 1)]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	b.d.decompressed.Add(int64(n))
	if zstdOver(err) {
		err = b.d.errTooLarge()
	}
	return n, err
}
