package kafka

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"svc/worker/config"
	"svc/worker/workertest"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Sizes of BenchmarkKafkaPipeline; SVC_BENCH_BACKLOG overrides the backlog.
const (
	kbPipelineMessages = 20_000
	kbSpawns           = 4_000
	kbBacklog          = 200_000
)

// BenchmarkKafkaPipeline measures Kafka → exec (cat) → Kafka sink with
// 1 KiB messages on kfake. Each iteration handles a fixed number of
// messages, so -benchtime 1x gives meaningful figures:
//
//   - pipeline: messages/s through the whole pipeline in process, from a
//     pre-produced topic to every offset committed.
//   - pipeline_persistent: the same with the sample executor (exec-demo:
//     hash, upper-case, JSON summary) in mode persistent.
//   - spawn_cat: the floor, bare os/exec spawns/s of the same cat with the
//     same input and as many at once as the executor pool runs.
//   - backlog_rss: the worker in a child process (so that kfake's copy of
//     the data is not counted) consumes a backlog with the sample
//     executor in mode persistent; its peak RSS (VmHWM) and throughput
//     are reported.
//
// Run: go test -run XXX -bench KafkaPipeline -benchtime 1x ./worker/kafka/
func BenchmarkKafkaPipeline(b *testing.B) {
	cat, err := exec.LookPath("cat")
	if err != nil {
		b.Skip("cat not installed")
	}
	payload := bytes.Repeat([]byte("0123456789abcdef"), 64)
	pool := runtime.NumCPU()

	b.Run("pipeline", func(b *testing.B) { kbPipeline(b, cat, nil, "spawn", payload) })
	// The same with the sample executor kept running (protocol v2 frames).
	self, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	b.Run("pipeline_persistent", func(b *testing.B) {
		kbPipeline(b, self, []string{"exec-demo"}, "persistent", payload)
	})

	b.Run("spawn_cat", func(b *testing.B) {
		var total time.Duration
		for range b.N {
			var next atomic.Int64
			var wg sync.WaitGroup
			start := time.Now()
			for range pool {
				wg.Go(func() {
					for next.Add(1) <= kbSpawns {
						cmd := exec.Command(cat)
						cmd.Stdin = bytes.NewReader(payload)
						if out, err := cmd.Output(); err != nil || len(out) != len(payload) {
							b.Errorf("cat = %d bytes, %v", len(out), err)
							return
						}
					}
				})
			}
			wg.Wait()
			total += time.Since(start)
		}
		b.ReportMetric(float64(b.N*kbSpawns)/total.Seconds(), "spawns/s")
	})

	b.Run("backlog_rss", func(b *testing.B) {
		backlog := kbBacklog
		if s := os.Getenv("SVC_BENCH_BACKLOG"); s != "" {
			backlog, _ = strconv.Atoi(s)
		}
		c := ktCluster(b, 6)
		addrs := c.ListenAddrs()
		adm := ktAdmin(b, addrs)
		var peak, rate float64
		for i := range b.N {
			topic := fmt.Sprintf("backlog-%d", i)
			kbTopic(b, addrs, topic, 6)
			kbFill(b, addrs, topic, backlog, payload)
			// The sample executor kept running: memory is the intake's
			// matter, and spawning per message would take an hour here.
			cfg := ktConfig(b, addrs, self)
			cfg.Executor.Args, cfg.Executor.Mode = []string{"exec-demo"}, "persistent"
			cfg.Sources.Kafka.Topic = topic
			cfg.Sources.Kafka.CommitInterval = config.Duration(time.Second)
			cfg.Sources.Kafka.MaxPollRecords = 500
			cfg.Executor.PoolSize = pool
			cfg.Pipeline.MaxInFlight = 0
			cfg.Resolve()
			logPath := filepath.Join(b.TempDir(), "child.log")
			start := time.Now()
			child := ktChild(b, ktWriteConfig(b, cfg), logPath)
			var hwm float64
			for {
				time.Sleep(500 * time.Millisecond)
				if rss := kbStatusKB(child.Process.Pid, "VmHWM"); rss > hwm {
					hwm = rss
				}
				if ktSum(ktCommittedOn(b, adm, cfg.Sources.Kafka.Group, topic)) >= int64(backlog) {
					break
				}
				if child.ProcessState != nil {
					out, _ := os.ReadFile(logPath)
					b.Fatalf("worker exited early:\n%s", workertest.Tail(string(out), 40))
				}
			}
			elapsed := time.Since(start)
			_ = child.Process.Signal(syscall.SIGTERM)
			_ = child.Wait()
			peak = max(peak, hwm)
			rate = float64(backlog) / elapsed.Seconds()
		}
		b.ReportMetric(peak/1024, "peak-RSS-MiB")
		b.ReportMetric(rate, "msgs/s")
		b.ReportMetric(float64(backlog), "backlog-msgs")
	})
}

// kbTopic creates a topic on the cluster.
func kbTopic(b *testing.B, addrs []string, topic string, partitions int32) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if _, err := ktAdmin(b, addrs).CreateTopic(ctx, partitions, 1, nil, topic); err != nil {
		b.Fatal(err)
	}
}

// kbFill produces n copies of payload with ids as keys.
func kbFill(b *testing.B, addrs []string, topic string, n int, payload []byte) {
	b.Helper()
	cl := ktClient(b, addrs, kgo.ProducerBatchMaxBytes(1<<20), kgo.ProducerBatchCompression(kgo.NoCompression()))
	ctx := context.Background()
	for from := 0; from < n; from += 10_000 {
		var recs []*kgo.Record
		for i := from; i < min(n, from+10_000); i++ {
			recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(strconv.Itoa(i)), Value: payload})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			b.Fatal(err)
		}
	}
}

// kbStatusKB reads a kB field of /proc/<pid>/status (0 when unreadable).
func kbStatusKB(pid int, field string) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, _ := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 64)
			return n
		}
	}
	return 0
}

// kbPipeline is one pipeline sub-benchmark: binary with args in mode.
func kbPipeline(b *testing.B, binary string, args []string, mode string, payload []byte) {
	c := ktCluster(b, 6)
	addrs := c.ListenAddrs()
	var total time.Duration
	for i := range b.N {
		b.StopTimer()
		topic := fmt.Sprintf("bench-%d", i)
		kbTopic(b, addrs, topic, 6)
		kbFill(b, addrs, topic, kbPipelineMessages, payload)
		cfg := ktConfig(b, addrs, binary)
		cfg.Executor.Args, cfg.Executor.Mode = args, mode
		cfg.Sources.Kafka.Topic = topic
		cfg.Executor.PoolSize = kbPool()
		cfg.Pipeline.MaxInFlight = kbInFlight() // default: 8 × pool
		cfg.Sources.Kafka.MaxPollRecords = 500
		w := ktNew(b, cfg)
		var done atomic.Int64
		var mu sync.Mutex
		latest := map[int32]int64{}
		w.Src.onCommit = func(m map[int32]int64) {
			mu.Lock()
			defer mu.Unlock()
			var sum int64
			for p, o := range m {
				latest[p] = o
			}
			for _, o := range latest {
				sum += o
			}
			done.Store(sum)
		}
		w.Start()
		// The clock starts once the group is joined: joining takes a
		// fixed few seconds on kfake that are not pipeline throughput.
		for ready, _ := w.App.Ready(); !ready; ready, _ = w.App.Ready() {
			time.Sleep(time.Millisecond)
		}
		b.StartTimer()
		start := time.Now()
		for i := 0; done.Load() < kbPipelineMessages; i++ {
			time.Sleep(20 * time.Millisecond)
			if os.Getenv("SVC_BENCH_DEBUG") != "" && i%25 == 0 {
				w.Src.mu.Lock()
				b.Logf("running %d waiting %d done %d", w.Src.running, w.Src.waiting, done.Load())
				w.Src.mu.Unlock()
			}
		}
		total += time.Since(start)
		b.StopTimer()
		w.Stop()
	}
	b.ReportMetric(float64(b.N*kbPipelineMessages)/total.Seconds(), "msgs/s")
}

// kbInFlight is pipeline.max_in_flight for the pipeline benchmarks:
// SVC_BENCH_INFLIGHT, or 0 (the default, 4 × pool).
func kbInFlight() int {
	n, _ := strconv.Atoi(os.Getenv("SVC_BENCH_INFLIGHT"))
	return n
}

// kbPool is the executor pool of the pipeline benchmarks: SVC_BENCH_POOL,
// or the number of CPUs.
func kbPool() int {
	if n, _ := strconv.Atoi(os.Getenv("SVC_BENCH_POOL")); n > 0 {
		return n
	}
	return runtime.NumCPU()
}
