// Command zstdread measures a worker's peak RSS while slow clients read a
// topic of highly compressed records through the read API (issue 38, item
// 1): a 64-partition topic of 640 records of 1 MB of zeros in zstd
// batches, set as the worker's DLQ topic, read by -readers concurrent
// clients of /api/v1/debug/kafka/dlq/messages (or DLQ pages, or redrive
// dry runs, or the worker's own consumer) that read -rate bytes a second
// each for -secs seconds.
//
//	go build -o /tmp/svc . && go run ./bench/zstdread -svc /tmp/svc -readers 8
//
// It runs the broker (kfake) in its own process, starts `svc run` as a
// child, and prints one line: the worker's RSS before the reads, its peak
// (VmHWM) and what the clients read.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

func main() {
	svc := flag.String("svc", "", "the svc binary")
	readers := flag.Int("readers", 8, "concurrent slow clients")
	mode := flag.String("mode", "messages", "messages | dlq (DLQ pages, scan=10000) | redrive (dry runs of 100 records) | consume (the worker's consumer reads the topic)")
	perBatch := flag.Int("batch", 10, "records per producer batch (each partition gets 10 records)")
	size := flag.Int("size", 1_000_000, "record size, zeros")
	codec := flag.String("codec", "zstd", "zstd | lz4 | gzip | snappy")
	rate := flag.Int("rate", 256<<10, "bytes a second each client reads")
	secs := flag.Int("secs", 30, "how long the clients read")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("zstdread: ")
	if *svc == "" {
		log.Fatal("-svc is required")
	}

	const parts, perPart = 64, 10
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(parts, "zz"), kfake.SeedTopics(1, "in", "out"))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	addr := c.ListenAddrs()[0]
	produce(addr, *codec, parts, perPart, *perBatch, *size)

	dir, err := os.MkdirTemp("", "zstdread")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	uiPort := freePort()
	src := "in"
	if *mode == "consume" {
		src = "zz"
	}
	cfg := fmt.Sprintf(`[worker]
name = "zstdread"
[metrics]
host = "127.0.0.1"
port = %d
[ui]
port = %d
allow_unauthenticated = true
redrive_enabled = true
[storage]
dir = %q
[executor]
binary_path = "/bin/true"
[sources.kafka]
enabled = true
brokers = [%q]
topic = %q
group = "zstdread"
[[sinks.kafka]]
name = "out"
topic = "out"
[dlq]
topic = "zz"
`, freePort(), uiPort, filepath.Join(dir, "data"), addr, src)
	cfgPath := filepath.Join(dir, "svc.toml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		log.Fatal(err)
	}
	cmd := exec.Command(*svc, append([]string{"run", "-config", cfgPath}, strings.Fields(os.Getenv("SVC_FLAGS"))...)...)
	logf, _ := os.Create(filepath.Join(dir, "svc.log"))
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		log.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
	}()
	base := fmt.Sprintf("http://127.0.0.1:%d", uiPort)
	for i := 0; ; i++ {
		if resp, err := http.Get(base + "/healthz"); err == nil {
			resp.Body.Close()
			break
		}
		if i > 300 {
			b, _ := os.ReadFile(filepath.Join(dir, "svc.log"))
			log.Fatalf("svc did not start:\n%s", b)
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(2 * time.Second)
	pid := cmd.Process.Pid
	before := status(pid, "VmRSS")

	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(*secs)*time.Second)
	defer cancel()
	var read, lines, firstMax atomic.Int64
	var errs sync.Map
	var wg sync.WaitGroup
	for i := range *readers {
		if *mode == "consume" {
			break
		}
		wg.Go(func() {
			for ctx.Err() == nil {
				var req *http.Request
				switch *mode {
				case "messages":
					req, _ = http.NewRequestWithContext(ctx, "GET", base+"/api/v1/debug/kafka/dlq/messages?from_ts=0", nil)
				case "dlq":
					req, _ = http.NewRequestWithContext(ctx, "GET", base+"/api/v1/debug/dlq/records?scan=10000&limit=200", nil)
				case "redrive":
					body := fmt.Sprintf(`{"partition":%d,"from_offset":0,"limit":100,"dry_run":true}`, i)
					req, _ = http.NewRequestWithContext(ctx, "POST", base+"/api/v1/debug/dlq/redrive", strings.NewReader(body))
				default:
					log.Fatalf("unknown -mode %s", *mode)
				}
				start := time.Now()
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					if ctx.Err() == nil {
						errs.Store(err.Error(), true)
						time.Sleep(time.Second)
					}
					continue
				}
				if resp.StatusCode != 200 {
					b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
					errs.Store(fmt.Sprintf("%d %s", resp.StatusCode, b), true)
				}
				br := bufio.NewReaderSize(resp.Body, 64<<10)
				buf := make([]byte, 16<<10)
				tick := time.Duration(int64(time.Second) * int64(len(buf)) / int64(*rate))
				for first := true; ; first = false {
					n, err := br.Read(buf)
					if first {
						if d := int64(time.Since(start) / time.Millisecond); d > firstMax.Load() {
							firstMax.Store(d)
						}
					}
					read.Add(int64(n))
					lines.Add(int64(strings.Count(string(buf[:n]), "\n")))
					if err != nil {
						break
					}
					time.Sleep(tick)
				}
				resp.Body.Close()
			}
		})
	}
	peakRSS := int64(0)
	for ctx.Err() == nil {
		peakRSS = max(peakRSS, status(pid, "VmRSS"))
		time.Sleep(100 * time.Millisecond)
	}
	wg.Wait()
	hwm := status(pid, "VmHWM")
	fmt.Printf("mode=%s codec=%s batch=%d readers=%d rate=%d secs=%d rss_before_mib=%.1f rss_peak_mib=%.1f hwm_mib=%.1f read_mib=%.1f lines=%d first_byte_max_ms=%d\n",
		*mode, *codec, *perBatch, *readers, *rate, *secs, mib(before), mib(peakRSS), mib(hwm), float64(read.Load())/(1<<20), lines.Load(), firstMax.Load())
	errs.Range(func(k, _ any) bool { fmt.Println("  error:", k); return true })
	if dst := os.Getenv("ZSTDREAD_LOG"); dst != "" { // the worker's log (e.g. with GODEBUG=gctrace=1)
		b, _ := os.ReadFile(filepath.Join(dir, "svc.log"))
		_ = os.WriteFile(dst, b, 0o600)
	}
}

func mib(kb int64) float64 { return float64(kb) / 1024 }

// produce writes perPart records of size zeros to each of parts
// partitions of "zz", perBatch records a producer batch, timestamps
// round-robin over the partitions.
func produce(addr, codec string, parts, perPart, perBatch, size int) {
	cc := map[string]kgo.CompressionCodec{"zstd": kgo.ZstdCompression(), "lz4": kgo.Lz4Compression(),
		"gzip": kgo.GzipCompression(), "snappy": kgo.SnappyCompression()}[codec]
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(cc), kgo.ProducerBatchMaxBytes(int32(perBatch*(size+1024))),
		kgo.ProducerLinger(time.Second), kgo.MaxBufferedBytes(0))
	if err != nil {
		log.Fatal(err)
	}
	defer cl.Close()
	ts := time.Now().Add(-time.Hour).UnixMilli()
	value := make([]byte, size)
	for done := 0; done < perPart; done += perBatch {
		var recs []*kgo.Record
		for i := range perBatch {
			for p := range parts {
				recs = append(recs, &kgo.Record{Topic: "zz", Partition: int32(p), Timestamp: time.UnixMilli(ts + int64((done+i)*parts+p)), Value: value})
			}
		}
		if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
			log.Fatal(err)
		}
	}
}

// status reads a kB field of /proc/pid/status.
func status(pid int, field string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, field+":"); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return n
		}
	}
	return 0
}

func freePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
