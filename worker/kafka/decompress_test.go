package kafka

import (
	"bytes"
	"fmt"
	"runtime"
	"testing"

	"github.com/klauspost/compress/s2"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestDecompressPoolServesWhatItKeeps: a buffer handed back serves the
// next batch that fits it, never one larger than its capacity, and sizes
// outside the kept classes are left to the codec and the collector.
func TestDecompressPoolServesWhatItKeeps(t *testing.T) {
	var p decompressPool
	src := make([]byte, 20<<10) // guessed at 160 KiB: the 256 KiB class
	b := p.GetDecompressBytes(src, kgo.CodecSnappy)
	if len(b) != 0 || cap(b) < len(src)*guessInflation {
		t.Fatalf("first buffer: len %d cap %d, want len 0 and cap >= %d", len(b), cap(b), len(src)*guessInflation)
	}
	b = append(b, "records"...)
	p.PutDecompressBytes(b)
	// A grown buffer (the codec needed more) goes to the class it fills.
	p.PutDecompressBytes(make([]byte, 3<<20)) // 3 MiB: the 2 MiB class
	for _, tc := range []struct {
		compressed int
		minCap     int
	}{
		{20 << 10, 160 << 10},
		{200 << 10, 1600 << 10},
		{1, 1},
	} {
		got := p.GetDecompressBytes(make([]byte, tc.compressed), kgo.CodecLz4)
		if len(got) != 0 || cap(got) < tc.minCap {
			t.Errorf("compressed %d bytes: len %d cap %d, want len 0 and cap >= %d", tc.compressed, len(got), cap(got), tc.minCap)
		}
	}
	if got := p.GetDecompressBytes(make([]byte, 16<<20), kgo.CodecZstd); got != nil {
		t.Errorf("16 MiB compressed: a %d-byte buffer, want none (the codec allocates)", cap(got))
	}
	p.PutDecompressBytes(make([]byte, 100)) // too small to keep: no panic, nothing kept
	p.PutDecompressBytes(make([]byte, 1<<27))
}

// A buffer handed back survives garbage collections (the Kafka path runs
// several between two fetches), and the lists keep at most maxKept bytes.
func TestDecompressPoolKeepsAcrossCollections(t *testing.T) {
	var p decompressPool
	src := make([]byte, 20<<10)
	b := p.GetDecompressBytes(src, kgo.CodecLz4)
	p.PutDecompressBytes(b)
	runtime.GC()
	runtime.GC()
	if got := p.GetDecompressBytes(src, kgo.CodecLz4); cap(got) != cap(b) || &got[:1][0] != &b[:1][0] {
		t.Fatal("after two collections the batch got a fresh buffer, not the one handed back")
	}
	for range 100 {
		p.PutDecompressBytes(make([]byte, 0, 256<<10))
	}
	if p.kept > maxKept || p.kept < maxKept-256<<10 {
		t.Fatalf("the lists hold %d bytes after 100 buffers of 256 KiB; want at most %d and close to it", p.kept, maxKept)
	}
	for i := range maxKept / (256 << 10) {
		if b := p.GetDecompressBytes(src, kgo.CodecLz4); cap(b) != 256<<10 || p.kept != maxKept-(i+1)*256<<10 {
			t.Fatalf("get %d: a %d-byte buffer, lists now %d bytes", i, cap(b), p.kept)
		}
	}
}

// snappyBatch is a snappy block of n 1 KiB JSON-like records, as a
// producer's batch of them compresses (far better than guessInflation).
func snappyBatch(n int) (compressed []byte, size int) {
	var raw bytes.Buffer
	for i := range n {
		fmt.Fprintf(&raw, `{"id":%d,"key":"k%d","pad":"%s"}`, i, i%11, bytes.Repeat([]byte("x"), 990))
	}
	return s2.EncodeSnappy(nil, raw.Bytes()), raw.Len()
}

// A snappy batch gets a buffer it decodes into whole: no allocation by
// the codec, whatever its compression ratio.
func TestDecompressPoolSizesSnappyExactly(t *testing.T) {
	var p decompressPool
	src, size := snappyBatch(200)
	if size/len(src) <= guessInflation {
		t.Fatalf("the batch compresses %dx, not more than the guess: the test proves nothing", size/len(src))
	}
	for range 20 {
		b := p.GetDecompressBytes(src, kgo.CodecSnappy)
		if cap(b) < size {
			t.Fatalf("a %d-byte buffer for a %d-byte batch", cap(b), size)
		}
		out, err := s2.Decode(b, src)
		if err != nil || len(out) != size || &out[0] != &b[:1][0] {
			t.Fatalf("decode: %d bytes, %v, into the pooled buffer %v", len(out), err, err == nil && &out[0] == &b[:1][0])
		}
		p.PutDecompressBytes(out)
	}
}

// BenchmarkDecompressSnappyBatch guards the pooled, exactly sized
// buffers: a 200-record snappy batch decoded as the consumer does.
func BenchmarkDecompressSnappyBatch(b *testing.B) {
	var p decompressPool
	src, size := snappyBatch(200)
	b.SetBytes(int64(size))
	b.ReportAllocs()
	for b.Loop() {
		buf := p.GetDecompressBytes(src, kgo.CodecSnappy)
		out, err := s2.Decode(buf, src)
		if err != nil {
			b.Fatal(err)
		}
		p.PutDecompressBytes(out)
	}
}
