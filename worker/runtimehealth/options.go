// Package runtimehealth watches the Go runtime of the worker: a heartbeat
// goroutine measures scheduler lag (how late a timer wakes it), stalls over
// a threshold get one goroutine stack sample, and a periodic sample carries
// goroutines, heap, GC, scheduler latency, open files, RSS and the executor
// pool queue. docs/runtime-health.md describes what operators see.
package runtimehealth

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Defaults for zero Options fields.
const (
	DefaultInterval         = 250 * time.Millisecond
	DefaultStallThreshold   = 100 * time.Millisecond
	DefaultStallQuiet       = 5 * time.Second
	DefaultStallSampleEvery = time.Minute
	DefaultEventEvery       = 10 * time.Second
	DefaultWindow           = 60 * time.Second
	DefaultHistory          = 60
	DefaultDumpBytes        = 64 << 10
)

// Bounds New checks beyond the ranges in the Options docs.
const (
	maxWindowReads = 360   // Window / EventEvery: cumulative reads kept for window deltas
	maxWindowBeats = 36000 // Window / Interval: lags kept for the percentiles
	keptStalls     = 5     // stall records Snapshot returns
)

// Options configure a Monitor. Zero fields take the Default* constants;
// values outside the ranges below are rejected by New.
type Options struct {
	Interval         time.Duration // heartbeat period, 10ms-10s
	StallThreshold   time.Duration // lag that counts as a stall, 1ms-1m
	StallQuiet       time.Duration // lag under the threshold this long ends an episode; up to 10m
	StallSampleEvery time.Duration // least time between two stack samples, 1s-24h
	EventEvery       time.Duration // sample cadence, 1s-1h
	// Window is the span the percentiles cover (EventEvery-1h, at most
	// maxWindowReads × EventEvery and maxWindowBeats × Interval).
	Window    time.Duration
	History   int // samples Snapshot returns, 1-1000
	DumpBytes int // the stored stack dump's cap, 4 KiB-1 MiB

	Registerer prometheus.Registerer // the svc_runtime_* metrics; nil registers none
	Logger     *slog.Logger          // runtime_stall_detected and _ended; nil discards
	// Emit, when set, is called from the monitor's goroutine with kind
	// "sample" (payload Sample), "stall" (Stall) or "stall_ended"
	// (StallEnd). It must not block.
	Emit func(kind string, payload any)
	// PoolQueue, when set, reports the executor pool; it must be quick and
	// safe for concurrent use.
	PoolQueue func() (busy, size, waiting int)
}

// withDefaults returns o with zero fields replaced by their defaults.
func (o Options) withDefaults() Options {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&o.Interval, DefaultInterval)
	def(&o.StallThreshold, DefaultStallThreshold)
	def(&o.StallQuiet, DefaultStallQuiet)
	def(&o.StallSampleEvery, DefaultStallSampleEvery)
	def(&o.EventEvery, DefaultEventEvery)
	def(&o.Window, DefaultWindow)
	if o.History == 0 {
		o.History = DefaultHistory
	}
	if o.DumpBytes == 0 {
		o.DumpBytes = DefaultDumpBytes
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Emit == nil {
		o.Emit = func(string, any) {}
	}
	return o
}

// validate names the field of the first bad value; o has its defaults.
func (o Options) validate() error {
	for _, d := range []struct {
		name      string
		v, lo, hi time.Duration
	}{
		{"Interval", o.Interval, 10 * time.Millisecond, 10 * time.Second},
		{"StallThreshold", o.StallThreshold, time.Millisecond, time.Minute},
		{"StallQuiet", o.StallQuiet, 0, 10 * time.Minute},
		{"StallSampleEvery", o.StallSampleEvery, time.Second, 24 * time.Hour},
		{"EventEvery", o.EventEvery, time.Second, time.Hour},
		{"Window", o.Window, o.EventEvery, time.Hour},
	} {
		if d.v < d.lo || d.v > d.hi {
			return fmt.Errorf("runtime health options: %s must be from %s to %s (got %s)", d.name, d.lo, d.hi, d.v)
		}
	}
	switch {
	case o.Window/o.EventEvery > maxWindowReads:
		return fmt.Errorf("runtime health options: Window must be at most %d × EventEvery (got %s with EventEvery %s)",
			maxWindowReads, o.Window, o.EventEvery)
	case o.Window/o.Interval > maxWindowBeats:
		return fmt.Errorf("runtime health options: Window must be at most %d × Interval (got %s with Interval %s)",
			maxWindowBeats, o.Window, o.Interval)
	case o.History < 1 || o.History > 1000:
		return fmt.Errorf("runtime health options: History must be from 1 to %d (got %d)", 1000, o.History)
	case o.DumpBytes < 4<<10 || o.DumpBytes > 1<<20:
		return fmt.Errorf("runtime health options: DumpBytes must be from %d to %d (got %d)", 4<<10, 1<<20, o.DumpBytes)
	}
	return nil
}
