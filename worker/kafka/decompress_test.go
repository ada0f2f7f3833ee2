package kafka

import (
	"testing"

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
