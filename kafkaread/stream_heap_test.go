package kafkaread

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"svc/worker/kconn"
	"svc/worker/workertest/wait"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// liveHeap returns the heap's live bytes after full GCs (two: a
// sync.Pool's items outlive the first).
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// TestStreamHeapIsBoundedAcrossPartitions: slow clients of streams over
// several partitions hold about ReadAheadBytes each in the worker's heap,
// whatever the partition count and however much the batches inflate: what
// a stream queues is its own copy, not a view that pins a whole fetch
// response per partition, and a fetch asks for less when its batches
// inflate. The broker runs in a child process, so the heap measured is the
// reader's alone; the test is not parallel, as it measures the heap.
func TestStreamHeapIsBoundedAcrossPartitions(t *testing.T) {
	for _, name := range []string{"incompressible", "zstd-zeros"} {
		t.Run(name, func(t *testing.T) { streamHeap(t, name) })
	}
}

const (
	heapPartitions = 8
	heapPerPart    = 2 << 20 // bytes produced per partition
)

// heapTopics are the topics of streamHeap: heapPartitions partitions of
// records of 1-64 KiB, heapPerPart bytes each. "incompressible" is random
// bytes in uncompressed batches of up to 256 KiB; "zstd-zeros" is
// zeros in zstd batches of up to 128 KiB, which inflate hundreds of times
// over, so that a fetch sized by stored bytes would hold the whole topic.
var heapTopics = map[string]struct {
	payload  func(*rand.Rand, int) []byte
	codec    kgo.CompressionCodec
	batchMax int32
}{
	"incompressible": {randBytes, kgo.NoCompression(), 256 << 10},
	"zstd-zeros":     {zeros, kgo.ZstdCompression(), 128 << 10},
}

// streamHeap lets 8 streams' clients read 40 records each of a
// heapTopics topic, slowly, then stall, and checks the live heap they add.
func streamHeap(t *testing.T, topic string) {
	const (
		streams   = 8
		take      = 40 // records each client reads (slowly) before it stalls
		perStream = 2 * ReadAheadBytes
	)
	addrs := childBroker(t, topic)
	aliases, _ := BuildAliases(AliasInput{
		SourceEnabled: true, SourceTopic: topicBig, SourceConn: kconn.Conn{Brokers: addrs},
	})
	r, err := New(aliases)
	if err != nil {
		t.Fatalf("New: %v", err)
	}

	base := liveHeap()
	ctx, cancel := context.WithCancel(t.Context())
	var stalled atomic.Int32
	ended := make(chan error, streams) // a stream that ended before its client stalled
	var wg sync.WaitGroup
	for range streams {
		wg.Go(func() {
			got := 0
			err := r.Stream(ctx, "source", StreamQuery{FromTS: 0}, func(Record) error {
				if got++; got < take {
					time.Sleep(2 * time.Millisecond)
					return nil
				}
				stalled.Add(1) // the client stops reading here
				<-ctx.Done()
				return ctx.Err()
			})
			if got < take {
				ended <- fmt.Errorf("after %d records: %v", got, err)
			}
		})
	}
	defer func() { cancel(); wg.Wait() }()
	wait.For(t, wait.Long, "every stream's client to stall", func() (bool, string) {
		select {
		case err := <-ended:
			t.Fatalf("a stream ended before its client stalled: %v", err)
		default:
		}
		n := stalled.Load()
		return n == streams, fmt.Sprintf("%d of %d stalled", n, streams)
	})
	// A stalled stream's client may still fetch ahead once: the most the
	// heap holds over a short while.
	var peak uint64
	for range 10 {
		peak = max(peak, liveHeap())
		time.Sleep(20 * time.Millisecond)
	}
	grew := int64(peak) - int64(base)
	t.Logf("%d stalled streams of %d partitions: live heap %d KiB over the %d KiB before them, %d KiB per stream",
		streams, heapPartitions, grew>>10, base>>10, grew/streams>>10)
	if grew > streams*perStream {
		t.Errorf("%d stalled streams hold %d KiB (%d KiB each), want at most %d KiB each",
			streams, grew>>10, grew/streams>>10, perStream>>10)
	}
}

// TestKfakeChildBroker is the broker of streamHeap, in a process of its
// own: it runs a kfake cluster holding the heapTopics topic named by
// KAFKAREAD_CHILD_TOPIC as topicBig, prints its address and stops when its
// stdin closes.
func TestKfakeChildBroker(t *testing.T) {
	topic, ok := heapTopics[os.Getenv("KAFKAREAD_CHILD_TOPIC")]
	if !ok {
		t.Skip("run by TestStreamHeapIsBoundedAcrossPartitions")
	}
	c := newCluster(t, kfake.SeedTopics(heapPartitions, topicBig))
	opts := []kgo.Opt{kgo.ProducerBatchCompression(topic.codec)}
	if topic.batchMax > 0 {
		opts = append(opts, kgo.ProducerBatchMaxBytes(topic.batchMax))
	}
	pr := newProducer(t, c.ListenAddrs(), opts...)
	rng := rand.New(rand.NewPCG(24, 8))
	var recs []*kgo.Record
	size := make([]int, heapPartitions)
	for ts := int64(1000); ; ts++ {
		p := rng.IntN(heapPartitions)
		if size[p] >= heapPerPart {
			if p = indexBelow(size, heapPerPart); p < 0 {
				break
			}
		}
		n := 1<<10 + rng.IntN(63<<10) // 1 KiB to 64 KiB
		size[p] += n
		recs = append(recs, &kgo.Record{Partition: int32(p), Timestamp: time.UnixMilli(ts), Value: topic.payload(rng, n)})
	}
	produce(t, pr, topicBig, recs...)
	fmt.Println("ADDR=" + c.ListenAddrs()[0])
	_, _ = io.Copy(io.Discard, os.Stdin)
}

// childBroker starts TestKfakeChildBroker and returns its address.
func childBroker(t *testing.T, topic string) []string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestKfakeChildBroker$", "-test.count=1")
	cmd.Env = append(os.Environ(), "KAFKAREAD_CHILD_TOPIC="+topic)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		_ = cmd.Wait()
	})
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if addr, ok := strings.CutPrefix(sc.Text(), "ADDR="); ok {
			go func() { _, _ = io.Copy(io.Discard, stdout) }()
			return []string{addr}
		}
	}
	t.Fatalf("the child broker printed no address: %v", sc.Err())
	return nil
}

// indexBelow returns the first index whose value is below limit, or -1.
func indexBelow(s []int, limit int) int {
	for i, v := range s {
		if v < limit {
			return i
		}
	}
	return -1
}

func randBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, (n+7)&^7)
	for i := 0; i < len(b); i += 8 {
		binary.LittleEndian.PutUint64(b[i:], rng.Uint64())
	}
	return b[:n]
}

func zeros(_ *rand.Rand, n int) []byte { return make([]byte, n) }
