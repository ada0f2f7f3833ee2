// Package gcfloor gives the garbage collector a floor under its heap goal.
//
// The Go collector starts a cycle when the heap has grown by GOGC % (100)
// of what the last cycle left live (plus goroutine stacks and globals),
// with a floor of 4 MiB. svc's live heap on the HTTP path is small (about
// 5 MiB), so it collected every 5 MiB allocated, about every 500 requests,
// and the collector took 7-15 % of the worker's CPU (bench/speed.sh, HTTP
// at 32 connections). With the floor, in the same run, a request cost 66
// µs of worker CPU at 8 connections and 71 at 32, without it 75 and 82,
// for a peak RSS of 46-47 MiB against 33-37. This package raises the floor
// to MinGoal: after each cycle GOGC is set so that the next goal is
// max(MinGoal, 2 × what the cycle left), at most MaxPercent. A heap that
// is larger anyway (a Kafka worker's, 8-11 MiB live through a backlog)
// keeps GOGC=100, so its peak memory does not move.
//
// An operator's GOGC or GOMEMLIMIT wins: with either set in the
// environment, Start does nothing.
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

// MaxPercent bounds the GOGC the floor sets (a heap of 2 MiB gets a goal
// of 10 MiB, not 20).
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

// Start keeps the heap goal at least minGoal bytes after every collection
// until stop is called; stop puts GOGC back to what it was. Start does
// nothing (and stop nothing) when Active is false.
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

// arm registers a cleanup that runs after the next collection; it adjusts
// GOGC and arms again.
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

// adjust sets GOGC from what the last collection left: the live heap,
// the stacks and the globals, which the goal is computed from.
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

// Percent is the GOGC that makes the goal of a heap whose collection left
// base bytes at least minGoal: max(100, (minGoal − base) / base) in
// percent, at most MaxPercent. Nothing measured yet (base 0) is 100.
func Percent(base, minGoal uint64) int {
	switch {
	case base == 0 || base >= minGoal/2:
		return 100
	case minGoal/base >= 1+MaxPercent/100:
		return MaxPercent
	}
	return max(100, int((minGoal-base)*100/base))
}
