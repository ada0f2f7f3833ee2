// Command kfloor is the bare Kafka floor of the speed benchmark: the
// simplest honest pipeline doing the work svc's Kafka path does, with none
// of svc's extras (no recorder, no metrics, no UI, no retries, no DLQ).
//
// A franz-go group consumer on -in hands each record to one of -children
// persistent executor children (protocol v2, through the benchmarks' own
// frame client bench/internal/frames, not svc's pool), picked by a hash of
// the key, so records of one key go to one child in order; each child's
// goroutine sends its task, reads the result and produces it to -out with
// the input's key (async, franz-go's default producer: idempotent,
// acks=all, snappy, 10 ms linger). An offset is marked for commit
// (kgo.AutoCommitMarks + MarkCommitRecords) once the results of it and of
// every earlier record of its partition were acknowledged, so commits never
// pass an unfinished record. Runs until SIGINT/SIGTERM, then finishes what
// it polled, commits and leaves the group.
package main

import (
	"context"
	"flag"
	"fmt"
	"hash/fnv"
	"log"
	"os"
	"os/signal"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"svc/bench/internal/frames"

	"github.com/twmb/franz-go/pkg/kgo"
)

func main() {
	brokers := flag.String("brokers", "127.0.0.1:9092", "comma-separated bootstrap brokers")
	in := flag.String("in", "in", "input topic")
	out := flag.String("out", "out", "output topic")
	group := flag.String("group", "kfloor", "consumer group")
	bin := flag.String("bin", "testdata/executors/echo-go", "persistent executor (protocol v2)")
	n := flag.Int("children", 8, "persistent children (svc's executor.pool_size)")
	pollMax := flag.Int("poll", 500, "records per poll (svc's sources.kafka.max_poll_records)")
	queue := flag.Int("queue", 64, "records waiting per child before polling blocks")
	commitEvery := flag.Duration("commit-interval", 5*time.Second, "auto-commit interval of the marks (svc's sources.kafka.commit_interval)")
	linger := flag.Duration("linger", -1, "producer linger (-1: franz-go's default)")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile to this file")
	flag.Parse()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			log.Fatalf("kfloor: %v", err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			log.Fatalf("kfloor: %v", err)
		}
		defer pprof.StopCPUProfile()
	}

	opts := []kgo.Opt{
		kgo.SeedBrokers(strings.Split(*brokers, ",")...),
		kgo.ConsumerGroup(*group),
		kgo.ConsumeTopics(*in),
		kgo.AutoCommitMarks(),
		kgo.AutoCommitInterval(*commitEvery),
		kgo.ClientID("kfloor"),
	}
	if *linger >= 0 {
		opts = append(opts, kgo.ProducerLinger(*linger))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		log.Fatalf("kfloor: %v", err)
	}

	var tr tracker
	tr.parts = map[int32]*partQueue{}
	tr.mark = cl.MarkCommitRecords
	var produced atomic.Int64
	queues := make([]chan *item, *n)
	var wg sync.WaitGroup
	for i := range queues {
		child, err := frames.Start(fmt.Sprintf("kfloor-%d", i), *bin)
		if err != nil {
			log.Fatalf("kfloor: %v", err)
		}
		q := make(chan *item, *queue)
		queues[i] = q
		wg.Go(func() {
			defer child.Close()
			for it := range q {
				r := it.rec
				body, err := child.Do(frames.Task{Source: "kafka", Partition: r.Partition, Offset: r.Offset, Key: r.Key}, r.Value)
				if err != nil {
					log.Fatalf("kfloor: %v", err)
				}
				res := &kgo.Record{Topic: *out, Key: r.Key, Value: append([]byte(nil), body...)}
				cl.Produce(context.Background(), res, func(_ *kgo.Record, err error) {
					if err != nil {
						log.Fatalf("kfloor: produce: %v", err)
					}
					produced.Add(1)
					tr.done(it)
				})
			}
		})
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	var next uint32
	for ctx.Err() == nil {
		fs := cl.PollRecords(ctx, *pollMax)
		if fs.IsClientClosed() {
			break
		}
		fs.EachError(func(t string, p int32, err error) {
			if ctx.Err() == nil {
				log.Printf("kfloor: fetch %s/%d: %v", t, p, err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			it := tr.add(r)
			var c uint32
			if r.Key != nil {
				h := fnv.New32a()
				h.Write(r.Key)
				c = h.Sum32()
			} else {
				next++
				c = next
			}
			queues[c%uint32(len(queues))] <- it
		})
	}
	for _, q := range queues {
		close(q)
	}
	wg.Wait()
	if err := cl.Flush(context.Background()); err != nil {
		log.Printf("kfloor: flush: %v", err)
	}
	cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cl.CommitMarkedOffsets(cctx); err != nil {
		log.Printf("kfloor: final commit: %v", err)
	}
	cl.Close()
	fmt.Fprintf(os.Stderr, "kfloor: %d results produced\n", produced.Load())
}

// item is one polled record and whether its result was acknowledged.
type item struct {
	rec  *kgo.Record
	done bool
}

// partQueue is a partition's polled records in offset order; head is the
// first one not yet acknowledged.
type partQueue struct {
	items []*item
	head  int
}

// tracker marks, per partition, the highest offset below which every
// record's result was acknowledged.
type tracker struct {
	mu    sync.Mutex
	parts map[int32]*partQueue
	mark  func(...*kgo.Record)
}

func (t *tracker) add(r *kgo.Record) *item {
	it := &item{rec: r}
	t.mu.Lock()
	pq := t.parts[r.Partition]
	if pq == nil {
		pq = &partQueue{}
		t.parts[r.Partition] = pq
	}
	pq.items = append(pq.items, it)
	t.mu.Unlock()
	return it
}

func (t *tracker) done(it *item) {
	t.mu.Lock()
	defer t.mu.Unlock()
	it.done = true
	pq := t.parts[it.rec.Partition]
	var last *kgo.Record
	for pq.head < len(pq.items) && pq.items[pq.head].done {
		last = pq.items[pq.head].rec
		pq.items[pq.head] = nil
		pq.head++
	}
	if pq.head > 1024 && pq.head*2 > len(pq.items) {
		pq.items = append(pq.items[:0], pq.items[pq.head:]...)
		pq.head = 0
	}
	if last != nil {
		t.mark(last)
	}
}
