// Command kdrive drives the Kafka runs of bench/speed.sh against a broker
// (bench/kbroker). Subcommands:
//
//	kdrive topics  -brokers B -partitions 6 -create in,out,in_dlq
//	kdrive topics  -brokers B -delete in,out,in_dlq
//	kdrive produce -brokers B -topic in -n 20000 -size 1024 -keys 1000
//	kdrive measure -brokers B -in in -out out -dlq in_dlq -group G -pid PID -n 20000
//	kdrive freeport
//
// produce writes a backlog of n records of size bytes: key "k<i mod keys>",
// value "<key> seq=<per-key sequence> " padded with 'x', so the output can
// be checked for loss, duplicates and per-key order.
//
// measure watches the system under test (process pid, started after the
// backlog was produced) work through it. The clock starts when the first
// result shows in -out (so a join delay, such as svc's startup alignment,
// is not counted) and stops when -out holds n results; msgs/s, worker CPU
// per message (utime+stime of pid, which excludes its children) and the
// executor children's CPU per message (and with -broker-pid the broker's)
// are taken over that window (the
// worker's helper processes, children running its own binary such as svc's
// executor guard, count as the worker's), peak RSS is pid's VmHWM, and
// first_ms is how long the first result took to show (the system's start,
// group join and first task). Then it waits until the group's committed
// offsets on -in reach the end offsets, reads -out back and checks every
// record arrived once, in order per key, and that the DLQ is empty. It prints one line of
// key=value figures and exits 1 if a check failed.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"svc/bench/internal/proc"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func main() {
	log.SetFlags(0)
	log.SetPrefix("kdrive: ")
	if len(os.Args) < 2 {
		log.Fatal("usage: kdrive topics|produce|measure|freeport [flags]")
	}
	cmd, args := os.Args[1], os.Args[2:]
	switch cmd {
	case "topics":
		topics(args)
	case "produce":
		produce(args)
	case "measure":
		measure(args)
	case "freeport":
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(l.Addr().(*net.TCPAddr).Port)
		l.Close()
	default:
		log.Fatalf("unknown subcommand %q", cmd)
	}
}

func client(brokers string, opts ...kgo.Opt) *kgo.Client {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(strings.Split(brokers, ",")...), kgo.ClientID("kdrive")}, opts...)...)
	if err != nil {
		log.Fatal(err)
	}
	return cl
}

func topics(args []string) {
	fs := flag.NewFlagSet("topics", flag.ExitOnError)
	brokers := fs.String("brokers", "127.0.0.1:9092", "bootstrap brokers")
	partitions := fs.Int("partitions", 6, "partitions of created topics")
	create := fs.String("create", "", "comma-separated topics to create")
	del := fs.String("delete", "", "comma-separated topics to delete")
	fs.Parse(args)
	cl := client(*brokers)
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if *create != "" {
		res, err := adm.CreateTopics(ctx, int32(*partitions), 1, nil, strings.Split(*create, ",")...)
		if err == nil {
			err = res.Error()
		}
		if err != nil {
			log.Fatalf("create topics: %v", err)
		}
	}
	if *del != "" {
		res, err := adm.DeleteTopics(ctx, strings.Split(*del, ",")...)
		if err == nil {
			err = res.Error()
		}
		if err != nil {
			log.Fatalf("delete topics: %v", err)
		}
	}
}

func produce(args []string) {
	fs := flag.NewFlagSet("produce", flag.ExitOnError)
	brokers := fs.String("brokers", "127.0.0.1:9092", "bootstrap brokers")
	topic := fs.String("topic", "in", "topic")
	n := fs.Int("n", 20000, "records")
	size := fs.Int("size", 1024, "value bytes")
	keys := fs.Int("keys", 1000, "distinct keys")
	fs.Parse(args)
	cl := client(*brokers, kgo.ProducerBatchMaxBytes(1<<20), kgo.MaxBufferedRecords(1<<20))
	defer cl.Close()
	ctx := context.Background()
	seq := make([]int, *keys)
	recs := make([]*kgo.Record, 0, 5000)
	for i := range *n {
		k := i % *keys
		key := "k" + strconv.Itoa(k)
		v := fmt.Appendf(nil, "%s seq=%08d ", key, seq[k])
		seq[k]++
		if len(v) < *size {
			v = append(v, bytes.Repeat([]byte("x"), *size-len(v))...)
		}
		recs = append(recs, &kgo.Record{Topic: *topic, Key: []byte(key), Value: v})
		if len(recs) == cap(recs) || i == *n-1 {
			if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				log.Fatalf("produce: %v", err)
			}
			recs = recs[:0]
		}
	}
}

func sum(o kadm.ListedOffsets) (s int64) {
	o.Each(func(l kadm.ListedOffset) { s += l.Offset })
	return s
}

func measure(args []string) {
	fs := flag.NewFlagSet("measure", flag.ExitOnError)
	brokers := fs.String("brokers", "127.0.0.1:9092", "bootstrap brokers")
	in := fs.String("in", "in", "input topic")
	out := fs.String("out", "out", "output topic")
	dlq := fs.String("dlq", "", "DLQ topic, checked empty (empty: no check)")
	group := fs.String("group", "", "consumer group of the system under test")
	pid := fs.Int("pid", 0, "pid of the system under test")
	brokerPid := fs.Int("broker-pid", 0, "pid of the broker process (bench/kbroker), for its CPU per message (0: not reported)")
	n := fs.Int64("n", 20000, "records in the backlog")
	timeout := fs.Duration("timeout", 10*time.Minute, "give up after")
	commitWait := fs.Duration("commit-timeout", 30*time.Second, "how long commits may take to reach the end after the last result")
	label := fs.String("label", "", "prefix of the result line (e.g. path=kafka sut=svc)")
	committed := fs.Bool("read-committed", false, "the system under test writes transactions (exactly-once): the run ends when the group's commits reach the input's end (a read_committed consumer then sees every result), and the output is verified read_committed")
	fs.Parse(args)
	cl := client(*brokers)
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	alive := func() error {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", *pid)); err != nil {
			return fmt.Errorf("process %d is gone", *pid)
		}
		return nil
	}
	outEnd := func() int64 {
		o, err := adm.ListEndOffsets(ctx, *out)
		if err != nil {
			log.Fatalf("list end offsets of %s: %v", *out, err)
		}
		return sum(o)
	}

	// brokerCPU is the broker's own CPU: a system under test that makes
	// the broker work harder per message (smaller produce batches, more
	// commits) costs the machine that too.
	brokerCPU := func() time.Duration {
		if *brokerPid == 0 {
			return 0
		}
		c, _ := proc.ReadCPU(*brokerPid)
		return c.Self
	}
	var broker0, broker1 time.Duration
	began := time.Now()
	var t0 time.Time
	var cpu0 proc.CPU
	var help0, tree0 time.Duration
	var out0 int64
	for {
		if err := alive(); err != nil {
			log.Fatal(err)
		}
		if c := outEnd(); c > 0 {
			t0, out0 = time.Now(), c
			cpu0, _ = proc.ReadCPU(*pid)
			help0, tree0 = proc.ChildrenCPU(*pid)
			broker0 = brokerCPU()
			break
		}
		if ctx.Err() != nil {
			log.Fatal("no result before the timeout")
		}
		time.Sleep(5 * time.Millisecond)
	}
	var t1 time.Time
	var cpu1 proc.CPU
	var help1, tree1 time.Duration
	inEnds, err := adm.ListEndOffsets(ctx, *in)
	if err != nil {
		log.Fatal(err)
	}
	progress := outEnd
	if *committed {
		// Transaction markers take offsets of the output: its end says
		// nothing about how many results there are.
		progress = func() int64 {
			got, err := adm.FetchOffsetsForTopics(ctx, *group, *in)
			if err != nil {
				return 0
			}
			var done int64
			inEnds.Each(func(l kadm.ListedOffset) {
				if r, found := got.Lookup(l.Topic, l.Partition); found && r.At > 0 {
					done += min(r.At, l.Offset)
				}
			})
			return done
		}
	}
	for {
		c := progress()
		if c >= *n {
			t1 = time.Now()
			cpu1, _ = proc.ReadCPU(*pid)
			help1, tree1 = proc.ChildrenCPU(*pid)
			broker1 = brokerCPU()
			break
		}
		if err := alive(); err != nil {
			log.Fatal(err)
		}
		if ctx.Err() != nil {
			log.Fatalf("%d of %d results before the timeout", c, *n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	hwm := proc.StatusKB(*pid, "VmHWM")
	msgs := *n - out0
	el := t1.Sub(t0)

	// Commits: every offset of the input committed by the group.
	inEnd, err := adm.ListEndOffsets(ctx, *in)
	if err != nil {
		log.Fatal(err)
	}
	commitMS := int64(-1)
	for deadline := time.Now().Add(*commitWait); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		got, err := adm.FetchOffsetsForTopics(ctx, *group, *in)
		if err != nil {
			continue
		}
		ok := true
		inEnd.Each(func(l kadm.ListedOffset) {
			if r, found := got.Lookup(l.Topic, l.Partition); !found || r.At < l.Offset {
				ok = false
			}
		})
		if ok {
			commitMS = time.Since(t1).Milliseconds()
			break
		}
	}

	lost, dup, disorder, total := verify(ctx, cl, adm, *out, *n, *committed)
	var dlqN int64
	if *dlq != "" {
		o, err := adm.ListEndOffsets(ctx, *dlq)
		if err != nil {
			log.Fatal(err)
		}
		dlqN = sum(o)
	}
	us := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(msgs) }
	fmt.Printf("%s rate=%.0f cpu_us=%.1f helper_cpu_us=%.1f child_cpu_us=%.1f waited_children_cpu_us=%.1f broker_cpu_us=%.1f rss_mib=%.1f first_ms=%d window_s=%.2f msgs=%d commit_ms=%d out=%d lost=%d dup=%d disorder=%d dlq=%d\n",
		*label, float64(msgs)/el.Seconds(), us(cpu1.Self-cpu0.Self+help1-help0), us(help1-help0), us(tree1-tree0), us(cpu1.Children-cpu0.Children), us(broker1-broker0),
		float64(hwm)/1024, t0.Sub(began).Milliseconds(), el.Seconds(), msgs, commitMS, total, lost, dup, disorder, dlqN)
	var bad []string
	if commitMS < 0 {
		bad = append(bad, fmt.Sprintf("commits did not reach the end offsets within %v", *commitWait))
	}
	if lost != 0 || dup != 0 || disorder != 0 || dlqN != 0 {
		bad = append(bad, fmt.Sprintf("lost=%d dup=%d disorder=%d dlq=%d", lost, dup, disorder, dlqN))
	}
	if len(bad) > 0 {
		log.Fatal(strings.Join(bad, "; "))
	}
}

// verify reads topic from the start to its end offsets and checks that
// every record of the backlog of n is there once, in order per key.
// With committed it reads as a read_committed consumer does, until every
// partition's last stable offset is at its end and a second passes
// without records (transaction markers are never returned).
func verify(ctx context.Context, cl *kgo.Client, adm *kadm.Client, topic string, n int64, committed bool) (lost, dup, disorder, total int64) {
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		log.Fatal(err)
	}
	want := map[int32]kgo.Offset{}
	ends.Each(func(l kadm.ListedOffset) {
		if l.Offset > 0 {
			want[l.Partition] = kgo.NewOffset().AtStart()
		}
		total += l.Offset
	})
	opts := []kgo.Opt{kgo.SeedBrokers(cl.OptValue(kgo.SeedBrokers).([]string)...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: want}), kgo.ClientID("kdrive-verify")}
	if committed {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(100*time.Millisecond))
	}
	rd, err := kgo.NewClient(opts...)
	if err != nil {
		log.Fatal(err)
	}
	defer rd.Close()
	last := map[string]int64{}
	seen := map[string]map[int64]bool{}
	var read int64
	stable, idle := map[int32]bool{}, time.Now()
	more := func() bool {
		if !committed {
			return read < total
		}
		return len(stable) < len(want) || time.Since(idle) < time.Second
	}
	for more() {
		pctx, pcancel := context.WithTimeout(ctx, 200*time.Millisecond)
		fetches := rd.PollFetches(pctx)
		pcancel()
		fetches.EachPartition(func(p kgo.FetchTopicPartition) {
			if end, ok := ends.Lookup(topic, p.Partition); ok && end.Offset > 0 && p.LastStableOffset >= end.Offset {
				stable[p.Partition] = true
			}
			if len(p.Records) > 0 {
				idle = time.Now()
			}
		})
		if ctx.Err() != nil {
			log.Fatalf("verify: %d of %d records read", read, total)
		}
		fetches.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
				log.Printf("verify: fetch %s/%d: %v", t, p, err)
			}
		})
		fetches.EachRecord(func(r *kgo.Record) {
			read++
			key := string(r.Key)
			s, ok := parseSeq(r.Value)
			if !ok {
				disorder++
				return
			}
			if seen[key] == nil {
				seen[key] = map[int64]bool{}
			}
			if seen[key][s] {
				dup++
				return
			}
			seen[key][s] = true
			if l, ok := last[key]; ok && s < l {
				disorder++
			}
			last[key] = max(last[key], s)
		})
	}
	var distinct int64
	for _, m := range seen {
		distinct += int64(len(m))
	}
	return n - distinct, dup, disorder, total
}

// parseSeq reads the per-key sequence number from "<key> seq=<n> xxx...".
func parseSeq(v []byte) (int64, bool) {
	i := bytes.Index(v, []byte(" seq="))
	if i < 0 {
		return 0, false
	}
	rest := v[i+5:]
	j := bytes.IndexByte(rest, ' ')
	if j < 0 {
		return 0, false
	}
	s, err := strconv.ParseInt(string(rest[:j]), 10, 64)
	return s, err == nil
}
