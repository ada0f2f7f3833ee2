package kconn

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"runtime"
	"testing"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// compress returns src as the client library's producer compresses it.
func compress(t *testing.T, codec kgo.CompressionCodec, src []byte) ([]byte, kgo.CompressionCodecType) {
	t.Helper()
	c, err := kgo.DefaultCompressor(codec)
	if err != nil {
		t.Fatal(err)
	}
	out, typ := c.Compress(new(bytes.Buffer), src)
	return bytes.Clone(out), typ
}

// zstdStream is src as a zstd stream that does not state its size (as
// Java's producer writes it), with a window of 256 KiB.
func zstdStream(t *testing.T, src []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	w, err := zstd.NewWriter(&b, zstd.WithWindowSize(256<<10))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(src); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// xerial frames src the Java way, in blocks of 32 KiB.
func xerial(src []byte) []byte {
	out := append([]byte{}, xerialPrefix...)
	out = append(out, 0, 0, 0, 1, 0, 0, 0, 1)
	for len(src) > 0 {
		n := min(len(src), 32<<10)
		block := s2.EncodeSnappy(nil, src[:n])
		out = binary.BigEndian.AppendUint32(out, uint32(len(block)))
		out = append(out, block...)
		src = src[n:]
	}
	return out
}

// allocated runs f and returns the bytes the heap allocated meanwhile.
func allocated(f func()) uint64 {
	var a, b runtime.MemStats
	runtime.ReadMemStats(&a)
	f()
	runtime.ReadMemStats(&b)
	return b.TotalAlloc - a.TotalAlloc
}

// TestDecompressorRoundTrips: every codec and framing decompresses to what
// was compressed.
func TestDecompressorRoundTrips(t *testing.T) {
	src := bytes.Repeat([]byte(`{"id":42,"name":"svc"} `), 20000) // 460 KB
	type batch struct {
		name  string
		data  []byte
		codec kgo.CompressionCodecType
	}
	var batches []batch
	for _, c := range []struct {
		name  string
		codec kgo.CompressionCodec
	}{{"gzip", kgo.GzipCompression()}, {"snappy", kgo.SnappyCompression()}, {"lz4", kgo.Lz4Compression()}, {"zstd", kgo.ZstdCompression()}} {
		data, typ := compress(t, c.codec, src)
		batches = append(batches, batch{c.name, data, typ})
	}
	batches = append(batches, batch{"zstd-unsized", zstdStream(t, src), kgo.CodecZstd}, batch{"xerial", xerial(src), kgo.CodecSnappy})
	d := NewDecompressor(1<<20, 1<<30)
	for _, b := range batches {
		out, err := d.Decompress(b.data, b.codec)
		if err != nil || !bytes.Equal(out, src) {
			t.Fatalf("%s: %d bytes, %v; want the %d bytes compressed", b.name, len(out), err, len(src))
		}
		r, release, err := d.Reader(b.data, b.codec)
		if err != nil {
			t.Fatalf("%s: Reader: %v", b.name, err)
		}
		got, err := io.ReadAll(r)
		release()
		if err != nil || !bytes.Equal(got, src) {
			t.Fatalf("%s: Reader read %d bytes, %v", b.name, len(got), err)
		}
	}
}

// TestDecompressorBoundsABatch (issue 38, item 1): a batch of zeros that
// inflates past MaxBatch is refused with kgo.ErrMaxDecompress, before
// anything is allocated when it states its size and after at most about
// MaxBatch otherwise, whatever the codec.
func TestDecompressorBoundsABatch(t *testing.T) {
	const maxBatch = 1 << 20
	zeros := make([]byte, 64<<20)
	type batch struct {
		name      string
		data      []byte
		codec     kgo.CompressionCodecType
		allocated uint64 // at most
	}
	var batches []batch
	for _, c := range []struct {
		name  string
		codec kgo.CompressionCodec
		alloc uint64
	}{{"gzip", kgo.GzipCompression(), 64 << 10}, {"snappy", kgo.SnappyCompression(), 64 << 10}, {"lz4", kgo.Lz4Compression(), 20 << 20}, {"zstd", kgo.ZstdCompression(), 64 << 10}} {
		data, typ := compress(t, c.codec, zeros)
		batches = append(batches, batch{c.name, data, typ, c.alloc})
	}
	// Unsized: read up to the bound into a growing buffer, with the
	// decoder's history (made again when the race detector drops it
	// from its pool). A whole decode would allocate the 64 MiB.
	batches = append(batches, batch{"zstd-unsized", zstdStream(t, zeros), kgo.CodecZstd, 12 * maxBatch})
	// A frame whose window is larger than the bound (zstd's default
	// writer: 8 MiB) is refused as well.
	var wide bytes.Buffer
	w, _ := zstd.NewWriter(&wide, zstd.WithWindowSize(8<<20))
	_, _ = w.Write(zeros[:4<<20])
	_ = w.Close()
	batches = append(batches, batch{"zstd-wide-window", wide.Bytes(), kgo.CodecZstd, 12 * maxBatch})
	d := NewDecompressor(maxBatch, maxBatch)
	for _, b := range batches {
		var err error
		n := allocated(func() { _, err = d.Decompress(b.data, b.codec) })
		if !errors.Is(err, kgo.ErrMaxDecompress) {
			t.Errorf("%s (%d bytes compressed): %v, want kgo.ErrMaxDecompress", b.name, len(b.data), err)
		}
		if n > b.allocated {
			t.Errorf("%s: refusing the batch allocated %d KiB, want at most %d KiB", b.name, n>>10, b.allocated>>10)
		}
		r, release, err := d.Reader(b.data, b.codec)
		if err == nil {
			_, err = io.Copy(io.Discard, r)
			release()
		}
		if !errors.Is(err, kgo.ErrMaxDecompress) {
			t.Errorf("%s: Reader: %v, want kgo.ErrMaxDecompress", b.name, err)
		}
	}
	if d.TooLarge() == 0 || d.Decompressed() > int64(len(batches))*(maxBatch+64<<10) {
		t.Errorf("TooLarge %d, Decompressed %d", d.TooLarge(), d.Decompressed())
	}
}

// TestDecompressorWindow: a fetch response decompresses its first batch
// and then at most Window bytes; the batches past it are deferred
// (ErrWindowFull, not decompressed when they state their size) until a
// new response opens a new window.
func TestDecompressorWindow(t *testing.T) {
	src := make([]byte, 600<<10)
	data, codec := compress(t, kgo.ZstdCompression(), src)
	d := NewDecompressor(1<<20, 1<<20)
	fetch := func() { d.OnBrokerRead(kgo.BrokerMetadata{}, int16(kmsg.Fetch), 0, 0, 0, nil) }
	fetch()
	for i, want := range []error{nil, ErrWindowFull, ErrWindowFull} { // 600 KiB, then 1,200 KiB > 1 MiB
		if _, err := d.Decompress(data, codec); !errors.Is(err, want) || (want != nil) != IsWindowFull(err) {
			t.Fatalf("batch %d of the response: %v, want %v", i, err, want)
		}
	}
	d.OnBrokerRead(kgo.BrokerMetadata{}, int16(kmsg.Metadata), 0, 0, 0, nil) // not a fetch: same window
	if _, err := d.Decompress(data, codec); !IsWindowFull(err) {
		t.Fatalf("after a metadata response: %v, want ErrWindowFull", err)
	}
	fetch()
	if _, err := d.Decompress(data, codec); err != nil {
		t.Fatalf("first batch of the next response: %v", err)
	}
	if d.Batches() != 2 || d.Deferred() != 3 || d.Decompressed() != 2*int64(len(src)) {
		t.Errorf("batches %d, deferred %d, decompressed %d", d.Batches(), d.Deferred(), d.Decompressed())
	}
	// A first batch larger than the window is read whole (up to MaxBatch).
	big, codec := compress(t, kgo.ZstdCompression(), make([]byte, 900<<10))
	small := NewDecompressor(1<<20, 64<<10)
	if out, err := small.Decompress(big, codec); err != nil || len(out) != 900<<10 {
		t.Fatalf("first batch over the window: %d bytes, %v", len(out), err)
	}
}

// TestDecompressorPerRecord: with PerRecord, a record's overhead counts
// against the window beside its bytes, so a batch of many small records
// that fits the window only by its bytes is deferred; the first batch of
// a response is still read whole.
func TestDecompressorPerRecord(t *testing.T) {
	records := func(n int) []byte {
		var b []byte
		for range n {
			b = binary.AppendVarint(b, 100)
			b = append(b, make([]byte, 100)...)
		}
		return b
	}
	one, codec := compress(t, kgo.ZstdCompression(), records(1))
	many, _ := compress(t, kgo.ZstdCompression(), records(1000)) // 101 KB, 357 KB with 256 B a record
	if got := countRecords(records(1000)); got != 1000 {
		t.Fatalf("countRecords = %d, want 1000", got)
	}
	for _, perRecord := range []int{0, 256} {
		d := NewDecompressor(1<<20, 200<<10).PerRecord(perRecord)
		d.OnBrokerRead(kgo.BrokerMetadata{}, int16(kmsg.Fetch), 0, 0, 0, nil)
		if _, err := d.Decompress(one, codec); err != nil {
			t.Fatalf("perRecord %d, first batch: %v", perRecord, err)
		}
		_, err := d.Decompress(many, codec)
		if want := perRecord > 0; IsWindowFull(err) != want {
			t.Errorf("perRecord %d: 1,000 records of 100 B in a 200 KiB window: %v, want deferred %v", perRecord, err, want)
		}
		d.OnBrokerRead(kgo.BrokerMetadata{}, int16(kmsg.Fetch), 0, 0, 0, nil)
		if _, err := d.Decompress(many, codec); err != nil {
			t.Errorf("perRecord %d: first batch of the next response: %v", perRecord, err)
		}
	}
}

// TestDecompressorCountsUncompressed checks that an uncompressed batch,
// which the client never hands to Decompress, counts against its
// response's window: a compressed batch that would fit alone is deferred
// after it, and the next response reads it first.
func TestDecompressorCountsUncompressed(t *testing.T) {
	small, codec := compress(t, kgo.ZstdCompression(), make([]byte, 60<<10))
	d := NewDecompressor(1<<20, 150<<10).PerRecord(256)
	fetch := func() { d.OnBrokerRead(kgo.BrokerMetadata{}, int16(kmsg.Fetch), 0, 0, 0, nil) }
	fetch()
	if _, err := d.Decompress(small, codec); err != nil {
		t.Fatalf("first batch: %v", err)
	}
	// 100 uncompressed records of 1 KiB: 100 KiB + 25.6 KB of overhead.
	d.OnFetchBatchRead(kgo.BrokerMetadata{}, "t", 0, kgo.FetchBatchMetrics{NumRecords: 100, UncompressedBytes: 100 << 10, CompressedBytes: 100 << 10})
	if _, err := d.Decompress(small, codec); !IsWindowFull(err) {
		t.Errorf("60 KiB after 60 KiB and 125 KiB of uncompressed records in a 150 KiB window: %v, want deferred", err)
	}
	// A compressed batch's metrics are not counted twice.
	fetch()
	if _, err := d.Decompress(small, codec); err != nil {
		t.Fatalf("first batch of the next response: %v", err)
	}
	d.OnFetchBatchRead(kgo.BrokerMetadata{}, "t", 0, kgo.FetchBatchMetrics{NumRecords: 1, UncompressedBytes: 60 << 10, CompressedBytes: len(small), CompressionType: uint8(codec)})
	if _, err := d.Decompress(small, codec); err != nil {
		t.Errorf("60 KiB after 60 KiB in a 150 KiB window (the compressed batch's metrics counted once): %v, want it read", err)
	}
}
