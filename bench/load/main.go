// Command load sends a fixed number of POST requests with a 1 KiB body at a
// fixed concurrency and prints requests/s and p50/p99. With a fixed count
// (unlike wrk's fixed duration) whole-process CPU figures of two runs can be
// compared request for request.
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
)

func main() {
	url := flag.String("url", "http://127.0.0.1:18098/v1/process", "target")
	n := flag.Int("n", 3000, "requests")
	c := flag.Int("c", 8, "concurrency")
	flag.Parse()
	body := bytes.Repeat([]byte("x"), 1024)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: *c}}
	var next atomic.Int64
	lat := make([]time.Duration, *n)
	start := time.Now()
	var wg sync.WaitGroup
	for range *c {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(*n) {
					return
				}
				t := time.Now()
				r, err := client.Post(*url, "application/octet-stream", bytes.NewReader(body))
				if err != nil {
					fmt.Fprintln(os.Stderr, err)
					os.Exit(1)
				}
				_, _ = io.Copy(io.Discard, r.Body)
				r.Body.Close()
				if r.StatusCode != 200 {
					fmt.Fprintln(os.Stderr, "status", r.StatusCode)
					os.Exit(1)
				}
				lat[i] = time.Since(t)
			}
		})
	}
	wg.Wait()
	el := time.Since(start)
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	fmt.Printf("%d requests c=%d: %.0f req/s p50=%v p99=%v\n", *n, *c, float64(*n)/el.Seconds(), lat[*n/2], lat[*n*99/100])
}
