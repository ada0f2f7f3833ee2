// Command load sends a fixed number of POST requests with a 1 KiB body at a
// fixed concurrency and prints requests/s and p50/p99 latency. With a fixed
// count (unlike wrk's fixed duration) whole-process CPU figures of two runs
// can be compared request for request.
//
// With -pid it also reports the CPU time of that process (the server under
// test: utime+stime, which excludes its children, plus its helper
// processes: children running its own binary, such as svc's executor
// guard) per measured request, the CPU of its other live children
// (persistent executors) per request, and its peak RSS (VmHWM). -warmup requests are sent first and not measured.
// -label prints one machine-readable line (label rate=… p50_ms=… …) after
// the human one.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"svc/bench/internal/proc"
)

func main() {
	url := flag.String("url", "http://127.0.0.1:18098/v1/process", "target")
	n := flag.Int("n", 3000, "requests")
	c := flag.Int("c", 8, "concurrency")
	size := flag.Int("size", 1024, "body bytes")
	warmup := flag.Int("warmup", 0, "requests sent first, not measured")
	pid := flag.Int("pid", 0, "server process whose CPU and peak RSS to report")
	label := flag.String("label", "", "also print a machine-readable line with this prefix")
	flag.IntVar(&minBytes, "min-bytes", 0, "answers shorter than this are errors (e.g. the body's size for an echo executor)")
	flag.Parse()
	body := bytes.Repeat([]byte("x"), *size)
	// No Accept-Encoding: gzip (Go's default): answers come as the server
	// sends them uncompressed, as to curl; servers that gzip whenever
	// asked (Benthos's http_server) would otherwise pay for it.
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: *c, DisableCompression: true}}
	if *warmup > 0 {
		send(client, *url, body, *warmup, *c)
	}
	var cpu0 proc.CPU
	var help0, tree0 time.Duration
	if *pid > 0 {
		cpu0, _ = proc.ReadCPU(*pid)
		help0, tree0 = proc.ChildrenCPU(*pid)
	}
	start := time.Now()
	lat := send(client, *url, body, *n, *c)
	el := time.Since(start)
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	rate := float64(*n) / el.Seconds()
	p50, p99 := lat[*n/2], lat[*n*99/100]
	fmt.Printf("%d requests c=%d: %.0f req/s p50=%v p99=%v", *n, *c, rate, p50, p99)
	var cpuUS, helperUS, childUS, waitedUS, rss float64
	if *pid > 0 {
		cpu1, _ := proc.ReadCPU(*pid)
		help1, tree1 := proc.ChildrenCPU(*pid)
		per := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(*n) }
		helperUS = per(help1 - help0)
		cpuUS, childUS, waitedUS = per(cpu1.Self-cpu0.Self)+helperUS, per(tree1-tree0), per(cpu1.Children-cpu0.Children)
		rss = float64(proc.StatusKB(*pid, "VmHWM")) / 1024
		fmt.Printf(" server CPU %.1f µs/req (of which helper processes %.1f; live children %.1f, waited children %.1f) peak RSS %.1f MiB",
			cpuUS, helperUS, childUS, waitedUS, rss)
	}
	fmt.Println()
	if *label != "" {
		fmt.Printf("%s rate=%.0f p50_ms=%.3f p99_ms=%.3f cpu_us=%.1f helper_cpu_us=%.1f child_cpu_us=%.1f waited_children_cpu_us=%.1f rss_mib=%.1f n=%d c=%d\n",
			*label, rate, ms(p50), ms(p99), cpuUS, helperUS, childUS, waitedUS, rss, *n, *c)
	}
}

// send sends n requests from c goroutines and returns their latencies; any
// error or non-200 answer ends the program.
func send(client *http.Client, url string, body []byte, n, c int) []time.Duration {
	var next atomic.Int64
	lat := make([]time.Duration, n)
	var wg sync.WaitGroup
	for range c {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				t := time.Now()
				r, err := client.Post(url, "application/octet-stream", bytes.NewReader(body))
				if err != nil {
					fmt.Fprintln(os.Stderr, "load:", err)
					os.Exit(1)
				}
				got, _ := io.ReadAll(r.Body)
				r.Body.Close()
				if r.StatusCode != 200 {
					fmt.Fprintf(os.Stderr, "load: status %d: %.200s\n", r.StatusCode, got)
					os.Exit(1)
				}
				if len(got) < minBytes {
					fmt.Fprintf(os.Stderr, "load: answer of %d bytes, expected at least %d: %.200q\n", len(got), minBytes, got)
					os.Exit(1)
				}
				lat[i] = time.Since(t)
			}
		})
	}
	wg.Wait()
	return lat
}

// minBytes: the least size of a good answer.
var minBytes int

func ms(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }
