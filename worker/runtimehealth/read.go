package runtimehealth

import (
	"math"
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"time"
)

// runtime/metrics names the sample reads.
const (
	mGoroutines   = "/sched/goroutines:goroutines"
	mGomaxprocs   = "/sched/gomaxprocs:threads"
	mHeapLive     = "/gc/heap/live:bytes"
	mHeapObjects  = "/memory/classes/heap/objects:bytes"
	mHeapUnused   = "/memory/classes/heap/unused:bytes"
	mHeapFree     = "/memory/classes/heap/free:bytes"
	mGCCycles     = "/gc/cycles/total:gc-cycles"
	mGCCPU        = "/cpu/classes/gc/total:cpu-seconds"
	mTotalCPU     = "/cpu/classes/total:cpu-seconds"
	mGCPauses     = "/sched/pauses/total/gc:seconds"
	mSchedLatency = "/sched/latencies:seconds"
)

// reading is one read: gauges, and monotonic values two readings turn
// into the figures of the span between them.
type reading struct {
	at                            time.Time
	goroutines, gomaxprocs        int64
	heapLiveBytes, heapTotalBytes uint64
	gcCycles                      uint64
	gcCPU, totalCPU               float64
	pauses, sched                 []uint64 // counts per bucket of mGCPauses, mSchedLatency
}

// reader reads runtime/metrics into a reused slice; the monitor goroutine
// owns it.
type reader struct {
	samples      []metrics.Sample
	pauseBuckets []float64
	schedBuckets []float64
}

func newReader() *reader {
	names := []string{mGoroutines, mGomaxprocs, mHeapLive, mHeapObjects, mHeapUnused, mHeapFree,
		mGCCycles, mGCCPU, mTotalCPU, mGCPauses, mSchedLatency}
	r := &reader{samples: make([]metrics.Sample, len(names))}
	for i, n := range names {
		r.samples[i].Name = n
	}
	return r
}

// read returns the reading at now; a metric this Go release does not know
// reads as zero.
func (r *reader) read(now time.Time) reading {
	metrics.Read(r.samples)
	c := reading{at: now}
	for _, s := range r.samples {
		v := s.Value
		switch s.Name {
		case mGoroutines:
			c.goroutines = int64(u64(v))
		case mGomaxprocs:
			c.gomaxprocs = int64(u64(v))
		case mHeapLive:
			c.heapLiveBytes = u64(v)
		case mHeapObjects, mHeapUnused, mHeapFree:
			c.heapTotalBytes += u64(v)
		case mGCCycles:
			c.gcCycles = u64(v)
		case mGCCPU:
			c.gcCPU = f64(v)
		case mTotalCPU:
			c.totalCPU = f64(v)
		case mGCPauses:
			c.pauses, r.pauseBuckets = histCopy(v, r.pauseBuckets)
		case mSchedLatency:
			c.sched, r.schedBuckets = histCopy(v, r.schedBuckets)
		}
	}
	return c
}

func u64(v metrics.Value) uint64 {
	if v.Kind() == metrics.KindUint64 {
		return v.Uint64()
	}
	return 0
}

func f64(v metrics.Value) float64 {
	if v.Kind() == metrics.KindFloat64 {
		return v.Float64()
	}
	return 0
}

// histCopy copies the counts, which the next read overwrites; the buckets
// never change for a metric name.
func histCopy(v metrics.Value, buckets []float64) ([]uint64, []float64) {
	if v.Kind() != metrics.KindFloat64Histogram {
		return nil, buckets
	}
	h := v.Float64Histogram()
	return append([]uint64(nil), h.Counts...), h.Buckets
}

// histDelta returns now − then per bucket; a missing then counts as zeros.
func histDelta(now, then []uint64) []uint64 {
	d := make([]uint64, len(now))
	for i, c := range now {
		if i < len(then) {
			c -= min(c, then[i])
		}
		d[i] = c
	}
	return d
}

// histQuantile returns the q-quantile (nearest rank) of a runtime histogram
// as the upper bound of the bucket holding it (its lower bound for the open
// last bucket). Zero counts give 0.
func histQuantile(counts []uint64, buckets []float64, q float64) float64 {
	total := histTotal(counts)
	if total == 0 || len(buckets) != len(counts)+1 {
		return 0
	}
	rank := max(uint64(math.Ceil(q*float64(total))), 1)
	var cum uint64
	for i, c := range counts {
		cum += c
		if cum < rank {
			continue
		}
		if hi := buckets[i+1]; !math.IsInf(hi, 1) {
			return hi
		}
		if lo := buckets[i]; !math.IsInf(lo, -1) {
			return lo
		}
		return 0
	}
	return 0
}

// histTotals are a runtime histogram's count and sum since the process
// started. The histogram keeps no sum, so each value counts at its
// bucket's lower bound, as in client_golang's go_* histograms.
type histTotals struct {
	count uint64
	sum   float64
}

func totalsOf(counts []uint64, buckets []float64) histTotals {
	t := histTotals{count: histTotal(counts)}
	if len(buckets) != len(counts)+1 {
		return t
	}
	for i, c := range counts {
		if lo := buckets[i]; c > 0 && !math.IsInf(lo, 0) && lo > 0 {
			t.sum += lo * float64(c)
		}
	}
	return t
}

func histTotal(counts []uint64) uint64 {
	var n uint64
	for _, c := range counts {
		n += c
	}
	return n
}

// openFDs counts /proc/self/fd on Linux; -1 elsewhere or when unreadable.
func openFDs() int64 {
	if runtime.GOOS != "linux" {
		return -1
	}
	f, err := os.Open("/proc/self/fd")
	if err != nil {
		return -1
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return -1
	}
	return int64(len(names) - 1) // the descriptor reading the directory
}

// rssBytes reads the resident set size from /proc/self/statm on Linux; -1
// elsewhere or when unreadable.
func rssBytes() int64 {
	if runtime.GOOS != "linux" {
		return -1
	}
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return -1
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return -1
	}
	pages, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil || pages < 0 {
		return -1
	}
	return pages * int64(os.Getpagesize())
}
