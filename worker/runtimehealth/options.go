// Package runtimehealth watches the Go runtime of the worker: a heartbeat
// goroutine measures scheduler lag (how late a timer wakes it against its
// schedule), stalls above a threshold get one goroutine stack sample, and a
// periodic sample carries goroutines, heap, GC pauses and CPU, scheduler
// latency, open file descriptors, RSS and the executor pool queue. It is
// Go's counterpart of an event-loop lag monitor.
//
// The package depends on the standard library and the Prometheus client
// only; the worker wires Emit to its flight recorder.
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

// Bounds of Options fields; a value outside them is rejected by New.
const (
	minInterval    = 10 * time.Millisecond
	maxInterval    = 10 * time.Second
	minThreshold   = time.Millisecond
	maxThreshold   = time.Minute
	maxQuiet       = 10 * time.Minute
	minSampleEvery = time.Second
	maxSampleEvery = 24 * time.Hour
	minEventEvery  = time.Second
	maxEventEvery  = time.Hour
	maxWindow      = time.Hour
	maxWindowReads = 360   // Window / EventEvery: cumulative reads kept for window deltas
	maxWindowBeats = 36000 // Window / Interval: lags kept for the percentiles
	maxHistory     = 1000
	minDumpBytes   = 4 << 10
	maxDumpBytes   = 1 << 20
	keptStalls     = 5 // stall records Snapshot returns
)

// Options configure a Monitor. Zero durations and counts take the Default*
// constants; negative or out-of-range values are rejected by New.
type Options struct {
	// Interval is the heartbeat period (250ms; 10ms-10s). Each beat costs
	// one timer wake-up and a clock read.
	Interval time.Duration
	// StallThreshold is the lag that counts as a stall (100ms; 1ms-1m).
	StallThreshold time.Duration
	// StallQuiet ends a stall episode once lag stayed under the threshold
	// this long (5s; up to 10m). One episode logs once.
	StallQuiet time.Duration
	// StallSampleEvery is the least time between two stack samples (1m;
	// 1s-24h). An episode starting sooner is recorded without a dump.
	StallSampleEvery time.Duration
	// EventEvery is the cadence of samples, each emitted as a
	// runtime_health event of kind "sample" (10s; 1s-1h).
	EventEvery time.Duration
	// Window is the span the percentiles cover (60s; EventEvery-1h, at most
	// 360 × EventEvery and 36000 × Interval).
	Window time.Duration
	// History is how many samples Snapshot returns (60; 1-1000).
	History int
	// DumpBytes caps the stored stack dump (64 KiB; 4 KiB-1 MiB).
	DumpBytes int

	// Registerer receives the svc_runtime_* metrics; nil registers none.
	Registerer prometheus.Registerer
	// Logger gets runtime_stall_detected and runtime_stall_ended; nil
	// discards. It should already carry component=runtime_health.
	Logger *slog.Logger
	// Emit, when set, is called from the monitor's goroutine with kind
	// "sample" (payload Sample), "stall" (payload Stall) or "stall_ended"
	// (payload StallEnd). It must not block; the worker stores each call
	// as a recorder event of type runtime_health with that kind.
	Emit func(kind string, payload any)
	// PoolQueue, when set, reports the executor pool (busy slots, pool
	// size, tasks waiting for a slot). It must be quick and safe for
	// concurrent use.
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
	return o
}

// validate names the field of the first bad value; o has its defaults.
func (o Options) validate() error {
	dur := func(name string, v, lo, hi time.Duration) error {
		if v < lo || v > hi {
			return fmt.Errorf("runtime health options: %s must be from %s to %s (got %s)", name, lo, hi, v)
		}
		return nil
	}
	for _, err := range []error{
		dur("Interval", o.Interval, minInterval, maxInterval),
		dur("StallThreshold", o.StallThreshold, minThreshold, maxThreshold),
		dur("StallQuiet", o.StallQuiet, 0, maxQuiet),
		dur("StallSampleEvery", o.StallSampleEvery, minSampleEvery, maxSampleEvery),
		dur("EventEvery", o.EventEvery, minEventEvery, maxEventEvery),
		dur("Window", o.Window, o.EventEvery, maxWindow),
	} {
		if err != nil {
			return err
		}
	}
	switch {
	case o.Window/o.EventEvery > maxWindowReads:
		return fmt.Errorf("runtime health options: Window must be at most %d × EventEvery (got %s with EventEvery %s)",
			maxWindowReads, o.Window, o.EventEvery)
	case o.Window/o.Interval > maxWindowBeats:
		return fmt.Errorf("runtime health options: Window must be at most %d × Interval (got %s with Interval %s)",
			maxWindowBeats, o.Window, o.Interval)
	case o.History < 1 || o.History > maxHistory:
		return fmt.Errorf("runtime health options: History must be from 1 to %d (got %d)", maxHistory, o.History)
	case o.DumpBytes < minDumpBytes || o.DumpBytes > maxDumpBytes:
		return fmt.Errorf("runtime health options: DumpBytes must be from %d to %d (got %d)", minDumpBytes, maxDumpBytes, o.DumpBytes)
	}
	return nil
}
