// Command spawnloop is the floor for the ingress benchmark: a bare os/exec
// loop of one executor with a fixed stdin, from N goroutines for a duration.
// It prints spawns/s and p50/p99 latency.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"sync"
	"time"
)

func main() {
	bin := flag.String("bin", "cat", "executor")
	conc := flag.Int("c", 8, "concurrent spawns")
	dur := flag.Duration("d", 10*time.Second, "duration")
	size := flag.Int("size", 1024, "stdin bytes")
	flag.Parse()
	input := bytes.Repeat([]byte("x"), *size)
	deadline := time.Now().Add(*dur)
	var mu sync.Mutex
	var lat []time.Duration
	var wg sync.WaitGroup
	for range *conc {
		wg.Go(func() {
			var mine []time.Duration
			for time.Now().Before(deadline) {
				start := time.Now()
				cmd := exec.Command(*bin)
				cmd.Stdin = bytes.NewReader(input)
				if out, err := cmd.Output(); err != nil || len(out) != len(input) {
					fmt.Fprintln(os.Stderr, "spawn failed:", err)
					os.Exit(1)
				}
				mine = append(mine, time.Since(start))
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	n := len(lat)
	fmt.Printf("spawnloop c=%d: %.0f spawns/s  p50=%.2fms  p99=%.2fms  (n=%d)\n", *conc, float64(n)/dur.Seconds(),
		ms(lat[n/2]), ms(lat[n*99/100]), n)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
