package sink

import (
	"fmt"
	"sync"
	"testing"

	"svc/worker/workertest"
)

// BenchmarkDeliver delivers ok 1 KiB results to one sink on a kfake
// broker from 64 goroutines, as a busy Kafka source does: it guards the
// per-result cost of the at-least-once delivery path (one record built
// per delivery, the sink's counter bound once).
func BenchmarkDeliver(b *testing.B) {
	c := workertest.Cluster(b, 1, []string{"out", "dlq"})
	ss := limitTestSet(b, c, &workertest.Logs{}, nil)
	results := make(chan int, 1024)
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
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		results <- n
		n++
	}
	close(results)
	wg.Wait()
}
