// Package gcfloor gives the garbage collector a floor under its heap goal.
//
// With GOGC=100 the collector's goal is twice what the last cycle left live
// (at least 4 MiB); svc's small live heap on the HTTP path made the
// collector take 7-15 % of the worker's CPU. After each cycle this package
// sets GOGC so that the next goal is max(MinGoal, 2 × what the cycle left),
// at most MaxPercent; a larger heap keeps GOGC=100. An operator's GOGC or
// GOMEMLIMIT wins: with either set, Start does nothing.
package gcfloor

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
)

// MinGoal is svc's floor under the heap goal.
const MinGoal = 20 << 20

// MaxPercent bounds the GOGC the floor sets.
const MaxPercent = 400

// Active reports whether the environment leaves the collector to svc: no
// GOGC and no GOMEMLIMIT set.
func Active() bool {
	return os.Getenv("GOGC") == "" && os.Getenv("GOMEMLIMIT") == ""
}

// floor is one running floor.
type floor struct {
	minGoal uint64
	stopped atomic.Bool
	mu      sync.Mutex
	sample  []metrics.Sample
	percent int
}

// Start keeps the heap goal at least minGoal bytes until stop, which puts
// GOGC back. It does nothing when Active is false.
func Start(minGoal uint64) (stop func()) {
	if !Active() || minGoal == 0 {
		return func() {}
	}
	f := &floor{minGoal: minGoal, percent: 100, sample: []metrics.Sample{
		{Name: "/gc/heap/live:bytes"}, {Name: "/gc/scan/stack:bytes"}, {Name: "/gc/scan/globals:bytes"}}}
	old := debug.SetGCPercent(100)
	f.arm()
	return func() {
		if f.stopped.CompareAndSwap(false, true) {
			f.mu.Lock()
			debug.SetGCPercent(old)
			f.mu.Unlock()
		}
	}
}

// arm adjusts GOGC after the next collection, and arms again.
func (f *floor) arm() {
	sentinel := new([16]byte)
	runtime.AddCleanup(sentinel, func(f *floor) {
		if f.stopped.Load() {
			return
		}
		f.adjust()
		f.arm()
	}, f)
}

// adjust sets GOGC from what the goal is computed from: the live heap,
// stacks and globals the last collection left.
func (f *floor) adjust() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stopped.Load() {
		return
	}
	metrics.Read(f.sample)
	var base uint64
	for _, s := range f.sample {
		if s.Value.Kind() == metrics.KindUint64 {
			base += s.Value.Uint64()
		}
	}
	if p := Percent(base, f.minGoal); p != f.percent {
		debug.SetGCPercent(p)
		f.percent = p
	}
}

// Percent is the GOGC that makes the goal after a collection that left base
// bytes at least minGoal, between 100 and MaxPercent (100 for base 0).
func Percent(base, minGoal uint64) int {
	switch {
	case base == 0 || base >= minGoal/2:
		return 100
	case minGoal/base >= 1+MaxPercent/100:
		return MaxPercent
	}
	return max(100, int((minGoal-base)*100/base))
}
