package kafka

import (
	"math/bits"
	"sync"

	"github.com/klauspost/compress/s2"
	"github.com/twmb/franz-go/pkg/kgo"
)

// decompressPool lends the consumer the buffers compressed batches are
// decompressed into (kgo.PoolDecompressBytes). The source copies every
// record out of its batch as it is polled (copyRecord) and recycles it,
// so a batch's buffer returns here once its records are polled, and the
// next batch of about its size reuses it. Without it every batch was a
// fresh large allocation (s2.Decode was 14 % of the bytes svc allocated in
// the Kafka bench), zeroed by the allocator, and its memory went back and
// forth between the heap and the kernel (runtime.madvise 2-6 % of svc's
// CPU).
//
// Buffers are kept by power-of-two capacity, from 64 KiB to 64 MiB,
// in free lists that hold at most maxKept bytes together. Not a
// sync.Pool: the collector empties one at every cycle, and the Kafka path
// runs several cycles between two fetches, so nearly every batch got a
// fresh buffer anyway (GetDecompressBytes was 15 % of the bytes svc
// allocated in the Kafka bench, with the pool in place). What the lists
// hold stays allocated while the consumer idles: at most maxKept.
type decompressPool struct {
	mu      sync.Mutex
	classes [maxClass - minClass + 1][][]byte
	kept    int // bytes held in classes
}

// maxKept bounds the bytes the free lists hold: about twice the default
// fetch budget (sources.kafka.fetch_buffer_bytes), whose batches are what
// comes back.
const maxKept = 4 << 20

const (
	minClass = 16 // 64 KiB
	maxClass = 26 // 64 MiB: larger buffers are not kept
)

// guessInflation is the decompressed size guessed per compressed byte.
// A guess too small only costs the codec's own allocation, which is then
// pooled in the class it fits.
const guessInflation = 8

// classOf is the class of a buffer of at least n bytes (ceil log2).
func classOf(n int) int {
	if n <= 1<<minClass {
		return minClass
	}
	return bits.Len(uint(n - 1))
}

// GetDecompressBytes implements kgo.PoolDecompressBytes. A snappy block
// states its decoded length up front: the buffer is sized by it (a guess
// too small made s2 allocate and zero a fresh buffer for every batch
// that compressed better than guessInflation, as 1 KiB JSON-like
// records do).
func (p *decompressPool) GetDecompressBytes(compressed []byte, codec kgo.CompressionCodecType) []byte {
	n := len(compressed) * guessInflation
	if codec == kgo.CodecSnappy {
		if l, err := s2.DecodedLen(compressed); err == nil && l > 0 {
			n = l
		}
	}
	c := classOf(n)
	if c > maxClass {
		return nil // the codec allocates what it needs
	}
	p.mu.Lock()
	if l := p.classes[c-minClass]; len(l) > 0 {
		b := l[len(l)-1]
		l[len(l)-1] = nil
		p.classes[c-minClass] = l[:len(l)-1]
		p.kept -= cap(b)
		p.mu.Unlock()
		return b[:0]
	}
	p.mu.Unlock()
	return make([]byte, 0, 1<<c)
}

// PutDecompressBytes implements kgo.PoolDecompressBytes: b goes to the
// largest class it can serve whole.
func (p *decompressPool) PutDecompressBytes(b []byte) {
	n := cap(b)
	if n < 1<<minClass {
		return
	}
	c := bits.Len(uint(n)) - 1 // floor log2
	if c > maxClass {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.kept+n > maxKept {
		return // left to the collector
	}
	p.classes[c-minClass] = append(p.classes[c-minClass], b[:0])
	p.kept += n
}
