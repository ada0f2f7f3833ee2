package runtimehealth

import (
	"bytes"
	"log/slog"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestEpisodes drives the beat handler with scripted lags: late beats close
// together are one episode, logged and emitted once; the stack sample is
// rate-limited across episodes.
func TestEpisodes(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	var kinds []string
	var ends []StallEnd
	m, err := New(Options{
		Logger: slog.New(slog.NewJSONHandler(&logs, nil)),
		Emit: func(kind string, payload any) {
			kinds = append(kinds, kind)
			if e, ok := payload.(StallEnd); ok {
				ends = append(ends, e)
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(1_700_000_000, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	m.beat(at(0), 150*time.Millisecond)              // episode 1, sampled
	m.beat(at(250*time.Millisecond), 0)              // quiet, too short to end it
	m.beat(at(time.Second), 200*time.Millisecond)    // same episode
	m.beat(at(7*time.Second), time.Millisecond)      // 6s quiet: ends
	m.beat(at(8*time.Second), 300*time.Millisecond)  // episode 2: sample rate-limited
	m.beat(at(70*time.Second), 0)                    // ends
	m.beat(at(71*time.Second), 120*time.Millisecond) // episode 3: sampled again

	if want := []string{"stall", "stall_ended", "stall", "stall_ended", "stall"}; !slices.Equal(kinds, want) {
		t.Errorf("emitted kinds = %v, want %v", kinds, want)
	}
	if len(ends) > 0 {
		want := StallEnd{TSMS: at(7 * time.Second).UnixMilli(), StartedMS: at(-150 * time.Millisecond).UnixMilli(),
			DurationMS: 1150, MaxLagMS: 200, LateBeats: 2}
		if ends[0] != want {
			t.Errorf("first stall_ended = %+v, want %+v", ends[0], want)
		}
	}
	if n := strings.Count(logs.String(), `"msg":"runtime_stall_detected"`); n != 3 {
		t.Errorf("runtime_stall_detected logged %d times, want 3 (once per episode):\n%s", n, logs.String())
	}
	s := m.Snapshot()
	if !s.InStall || s.StallsTotal != 3 || len(s.Stalls) != 3 {
		t.Fatalf("snapshot in_stall %v, stalls_total %d, %d stalls; want true, 3, 3", s.InStall, s.StallsTotal, len(s.Stalls))
	}
	var sampled []bool
	for _, st := range s.Stalls {
		sampled = append(sampled, st.Sampled)
	}
	if want := []bool{true, false, true}; !slices.Equal(sampled, want) {
		t.Errorf("sampled, newest first = %v, want %v", sampled, want)
	}
	if s.Stalls[1].Dump != "" || s.Stalls[0].Dump == "" || s.Stalls[0].LagMS != 120 {
		t.Errorf("stalls = %+v, want the rate-limited one without a dump and the newest with lag 120 ms", s.Stalls)
	}
}

func TestStallsKeptAreBounded(t *testing.T) {
	t.Parallel()
	m, err := New(Options{StallQuiet: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(1_700_000_000, 0)
	for i := range 3 * keptStalls {
		m.beat(t0.Add(time.Duration(2*i)*time.Second), time.Second)
		m.beat(t0.Add(time.Duration(2*i+1)*time.Second+time.Millisecond), 0)
	}
	s := m.Snapshot()
	if s.StallsTotal != 3*keptStalls || len(s.Stalls) != keptStalls {
		t.Errorf("stalls_total %d with %d kept, want %d with %d", s.StallsTotal, len(s.Stalls), 3*keptStalls, keptStalls)
	}
}

// parkedHere blocks in a function the dump must name.
//
//go:noinline
func parkedHere(ch chan struct{}) { <-ch }

func TestCaptureStacks(t *testing.T) {
	t.Parallel()
	const parkers = 1000
	ch := make(chan struct{})
	var wg, started sync.WaitGroup
	started.Add(parkers)
	for range parkers {
		wg.Go(func() { started.Done(); parkedHere(ch) })
	}
	t.Cleanup(func() { close(ch); wg.Wait() })
	started.Wait()
	runtime.Gosched()

	const limit = 16 << 10
	frames, dump, cut := captureStacks(limit)
	if !cut || len(dump) > limit || !strings.HasSuffix(dump, "\n") {
		t.Errorf("dump of %d bytes, cut %v: want at most %d bytes ending a line, cut", len(dump), cut, limit)
	}
	if strings.Contains(dump, "TestCaptureStacks(") {
		t.Error("dump holds the capturing goroutine's own stack")
	}
	parked, receiving := 0, false
	for _, f := range frames {
		if strings.HasSuffix(f.Function, "runtimehealth.parkedHere") && strings.Contains(f.Location, "episode_test.go:") {
			parked += f.Goroutines
			receiving = receiving || f.State == "chan receive"
		}
	}
	// The frames come from a capture four times the stored size, so they
	// count more goroutines than the stored dump holds.
	if stored := strings.Count(dump, "parkedHere("); !receiving || parked <= stored {
		t.Errorf("top frames = %+v; want parkedHere in chan receive, more than the %d in the stored dump", frames, stored)
	}
}

func TestTopFrames(t *testing.T) {
	t.Parallel()
	dump := "goroutine 7 [chan receive, 2 minutes]:\n" +
		"main.wait(0xc000010000)\n\t/src/main.go:12 +0x1d\ncreated by main.main in goroutine 1\n\t/src/main.go:30 +0x5\n\n" +
		"goroutine 8 [chan receive]:\n" +
		"main.wait(0xc000010000)\n\t/src/main.go:12 +0x1d\n\n" +
		"goroutine 9 [runnable]:\n" +
		"main.(*Job).crunch(...)\n\t/src/job.go:40 +0x99\nmain.run()\n\t/src/job.go:10\n\n" +
		"goroutine 10 [select]:\n" +
		"net/http.(*conn).serve(0xc0001, {0x1, 0x2})\n\t/go/net/http/server.go:2000 +0x10\n\n" +
		"goroutine 12 [runnable]:\n" + // named by the caller of runtime.Gosched
		"runtime.Gosched()\n\t/go/runtime/proc.go:391 +0x12\nmain.(*Job).crunch(...)\n\t/src/job.go:40 +0x99\nmain.run()\n\t/src/job.go:10\n\n" +
		"goroutine 13 [runnable]:\n" + // only runtime frames: the innermost
		"runtime.Gosched()\n\t/go/runtime/proc.go:391 +0x12\ncreated by main.main in goroutine 1\n\t/src/main.go:31 +0x5\n\n" +
		"goroutine 11 [runnable]:\n" + // cut off: no frame
		"main.half("
	got := topFrames([]byte(dump))
	want := []Frame{
		{State: "runnable", Function: "main.(*Job).crunch", Location: "/src/job.go:40", Goroutines: 2},
		{State: "runnable", Function: "runtime.Gosched", Location: "/go/runtime/proc.go:391", Goroutines: 1},
		{State: "chan receive", Function: "main.wait", Location: "/src/main.go:12", Goroutines: 2},
		{State: "select", Function: "net/http.(*conn).serve", Location: "/go/net/http/server.go:2000", Goroutines: 1},
	}
	if !slices.Equal(got, want) {
		t.Errorf("topFrames = %+v\nwant %+v", got, want)
	}
}

func TestHistQuantile(t *testing.T) {
	t.Parallel()
	buckets := []float64{0, 1, 2, 4, 8}
	for _, tc := range []struct {
		name    string
		counts  []uint64
		buckets []float64
		q, want float64
	}{
		{"empty", []uint64{0, 0, 0, 0}, buckets, 0.5, 0},
		{"median in second bucket", []uint64{1, 2, 1, 0}, buckets, 0.5, 2},
		{"p99 in last bucket", []uint64{50, 49, 0, 1}, buckets, 0.99, 2},
		{"p100 in last bucket", []uint64{50, 49, 0, 1}, buckets, 1, 8},
		{"one sample", []uint64{0, 0, 1, 0}, buckets, 0.01, 4},
		{"open last bucket gives its lower bound", []uint64{0, 0, 0, 3}, []float64{0, 1, 2, 4, math.Inf(1)}, 0.5, 4},
		{"mismatched buckets", []uint64{1}, buckets, 0.5, 0},
		{"open first bucket", []uint64{2, 0, 0, 0}, []float64{math.Inf(-1), 1, 2, 4, 8}, 0.5, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := histQuantile(tc.counts, tc.buckets, tc.q); got != tc.want {
				t.Errorf("histQuantile(%v, %v, %v) = %v, want %v", tc.counts, tc.buckets, tc.q, got, tc.want)
			}
		})
	}
}

func TestLagRingWindow(t *testing.T) {
	t.Parallel()
	r := newLagRing(4)
	t0 := time.Unix(1_700_000_000, 0)
	for i, lag := range []time.Duration{90, 10, 20, 30, 40} { // the first is overwritten
		r.add(t0.Add(time.Duration(i)*time.Second), lag*time.Millisecond)
	}
	if got, want := r.stats(t0), (lagStats{beats: 4, p50: 20 * time.Millisecond, p99: 40 * time.Millisecond, max: 40 * time.Millisecond}); got != want {
		t.Errorf("stats over the ring = %+v, want %+v", got, want)
	}
	if got, want := r.stats(t0.Add(3*time.Second)), (lagStats{beats: 2, p50: 30 * time.Millisecond, p99: 40 * time.Millisecond, max: 40 * time.Millisecond}); got != want {
		t.Errorf("stats since the 4th beat = %+v, want %+v", got, want)
	}
	if got := r.stats(t0.Add(time.Hour)); got != (lagStats{}) {
		t.Errorf("stats of an empty window = %+v, want zero", got)
	}
}
