package sink

import (
	"fmt"
	"runtime"
	"sync"
	"testing"

	"svc/worker/workertest"
)

// BenchmarkDeliver delivers ok 1 KiB results to one sink on a kfake
// broker from 64 goroutines, as a busy Kafka source does: it guards the
// per-result cost of the at-least-once delivery path (one record built
// per delivery, the sink's counter bound once); goroutines-peak counts
// the delivering goroutines with the producer's own.
func BenchmarkDeliver(b *testing.B) {
	c := workertest.Cluster(b, 1, []string{"out", "dlq"})
	ss := limitTestSet(b, c, &workertest.Logs{}, nil)
	results := make(chan int, 1024)
	base := runtime.NumGoroutine()
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			for i := range results {
				if err := ss.Deliver(b.Context(), okResult(fmt.Sprint("t-", i), 1024)); err != nil {
					b.Error(err)
				}
			}
		})
	}
	peak := 0
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		results <- n
		if n%256 == 0 {
			peak = max(peak, runtime.NumGoroutine()-base)
		}
		n++
	}
	close(results)
	wg.Wait()
	b.ReportMetric(float64(peak), "goroutines-peak")
}

// BenchmarkDeliverAsync is BenchmarkDeliver through DeliverAsync with as
// many deliveries under way (64): the Kafka source's path. It guards the
// fast path's point: no goroutine waits for a delivery (goroutines-peak
// stays at the producer's own, where BenchmarkDeliver needs one per
// delivery under way) and its per-result cost.
func BenchmarkDeliverAsync(b *testing.B) {
	c := workertest.Cluster(b, 1, []string{"out", "dlq"})
	ss := limitTestSet(b, c, &workertest.Logs{}, nil)
	if err := ss.Deliver(b.Context(), okResult("warm", 1024)); err != nil { // the topic limit is known
		b.Fatal(err)
	}
	slots := make(chan struct{}, 64)
	base := runtime.NumGoroutine()
	peak := 0
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		slots <- struct{}{}
		ss.DeliverAsync(b.Context(), okResult(fmt.Sprint("t-", n), 1024), func(err error) {
			if err != nil {
				b.Error(err)
			}
			<-slots
		})
		if n%256 == 0 {
			peak = max(peak, runtime.NumGoroutine()-base)
		}
		n++
	}
	for range cap(slots) {
		slots <- struct{}{}
	}
	b.ReportMetric(float64(peak), "goroutines-peak")
}
