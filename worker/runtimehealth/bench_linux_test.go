//go:build linux

package runtimehealth

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// BenchmarkIdleCPU reports the process CPU (user + system, from getrusage)
// as a percentage of one core while the process idles, without ("off") and
// with ("on") a monitor at the default settings. Each iteration idles one
// second; measure over 20 s with
//
//	go test -run '^$' -bench IdleCPU -benchtime 20x ./worker/runtimehealth/
func BenchmarkIdleCPU(b *testing.B) {
	for _, on := range []bool{false, true} {
		name := "off"
		if on {
			name = "on"
		}
		b.Run(name, func(b *testing.B) {
			ctx, cancel := context.WithCancel(b.Context())
			defer cancel()
			done := make(chan error, 1)
			if on {
				m, err := New(Options{Registerer: prometheus.NewRegistry(), Emit: func(string, any) {}})
				if err != nil {
					b.Fatal(err)
				}
				go func() { done <- m.Run(ctx) }()
			} else {
				done <- nil
			}
			time.Sleep(100 * time.Millisecond) // past the first sample
			cpu0, wall0 := cpuTime(b), time.Now()
			for range b.N {
				time.Sleep(time.Second)
			}
			cpu, wall := cpuTime(b)-cpu0, time.Since(wall0)
			b.ReportMetric(100*cpu.Seconds()/wall.Seconds(), "cpu_%")
			cancel()
			if err := <-done; err != nil {
				b.Fatal(err)
			}
		})
	}
}

func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkSample is the cost of one periodic sample (every EventEvery).
func BenchmarkSample(b *testing.B) {
	m, err := New(Options{EventEvery: time.Second, Window: time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now()
	for b.Loop() {
		now = now.Add(time.Second)
		m.sample(now)
	}
}

// BenchmarkBeat is the cost of handling one heartbeat (every Interval).
func BenchmarkBeat(b *testing.B) {
	m, err := New(Options{})
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now()
	for b.Loop() {
		now = now.Add(DefaultInterval)
		m.beat(now, 50*time.Microsecond)
	}
}
