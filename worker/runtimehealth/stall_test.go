package runtimehealth

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// stallChildEnv makes the test binary run stallChild instead of the tests.
const stallChildEnv = "SVC_RUNTIMEHEALTH_STALL_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(stallChildEnv) == "1" {
		os.Exit(stallChild())
	}
	os.Exit(m.Run())
}

// emitted is one Emit call as the child prints it.
type emitted struct {
	Kind    string          `json:"kind"`
	Payload json.RawMessage `json:"payload"`
}

// TestStallIsSampledAndLogged runs a real stall: a child process with one P
// and asynchronous preemption off, where a goroutine spins without function
// calls, so nothing else runs until it yields. The monitor must record the
// episode once with a stack sample naming the spinning code.
func TestStallIsSampledAndLogged(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), exe)
	cmd.Env = append(os.Environ(), stallChildEnv+"=1", "GOMAXPROCS=1", "GODEBUG=asyncpreemptoff=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("stall child: %v\nstderr:\n%s", err, stderr.String())
	}

	var stalls []Stall
	var ends []StallEnd
	for line := range strings.Lines(stdout.String()) {
		var e emitted
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("child output line %q: %v", line, err)
		}
		switch e.Kind {
		case "stall":
			var s Stall
			if err := json.Unmarshal(e.Payload, &s); err != nil {
				t.Fatal(err)
			}
			stalls = append(stalls, s)
		case "stall_ended":
			var s StallEnd
			if err := json.Unmarshal(e.Payload, &s); err != nil {
				t.Fatal(err)
			}
			ends = append(ends, s)
		}
	}
	logged := 0
	sc := bufio.NewScanner(&stderr)
	for sc.Scan() {
		var rec struct{ Msg string }
		if json.Unmarshal(sc.Bytes(), &rec) == nil && rec.Msg == "runtime_stall_detected" {
			logged++
		}
	}

	var spun *Stall
	for i, s := range stalls {
		if s.LagMS < s.ThresholdMS {
			t.Errorf("stall %d: lag_ms = %v, under threshold_ms %v", i, s.LagMS, s.ThresholdMS)
		}
		if s.Sampled && strings.Contains(s.Dump, "runtimehealth.burst") {
			spun = &stalls[i]
		}
	}
	if spun == nil {
		t.Fatalf("no stall event with a stack sample of the spinning goroutine; stalls: %+v", stalls)
	}
	if len(spun.Dump) == 0 || len(spun.Dump) > DefaultDumpBytes {
		t.Errorf("dump size = %d, want 1..%d", len(spun.Dump), DefaultDumpBytes)
	}
	found := false
	for _, f := range spun.TopFrames {
		if strings.HasPrefix(f.Function, "svc/worker/runtimehealth.") && f.State == "runnable" {
			found = true
		}
	}
	if !found {
		t.Errorf("top frames = %+v, want a runnable frame of the spinning goroutine", spun.TopFrames)
	}
	// The bursts form one episode of several late beats, logged once.
	if logged != len(stalls) {
		t.Errorf("runtime_stall_detected logged %d times for %d episodes", logged, len(stalls))
	}
	multi := false
	for _, e := range ends {
		multi = multi || e.LateBeats >= 2
	}
	if !multi {
		t.Errorf("stall_ended events = %+v, want one episode with 2 or more late beats", ends)
	}
}

// stallChild runs the monitor, stalls the only P three times and prints
// every Emit as a JSON line on stdout; logs go to stderr as JSON.
func stallChild() int {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var mu sync.Mutex
	enc := json.NewEncoder(os.Stdout)
	ended := make(chan struct{}, 1)
	m, err := New(Options{
		Interval:         10 * time.Millisecond,
		StallQuiet:       500 * time.Millisecond,
		StallSampleEvery: time.Second,
		EventEvery:       time.Second,
		Window:           time.Second,
		Logger:           slog.New(slog.NewJSONHandler(os.Stderr, nil)),
		Emit: func(kind string, payload any) {
			mu.Lock()
			defer mu.Unlock()
			_ = enc.Encode(map[string]any{"kind": kind, "payload": payload})
			if kind == "stall_ended" {
				select {
				case ended <- struct{}{}:
				default:
				}
			}
		},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	// Calibrating spins too and may itself stall the monitor on a loaded
	// machine: do it first, then start the bursts from calm (beating, no
	// episode open, a stack sample due), so their stall is the sampled one.
	n := spinFor(400 * time.Millisecond)
	for {
		s := m.Snapshot()
		if s.LastBeatMS != 0 && !s.InStall &&
			(len(s.Stalls) == 0 || time.Since(time.UnixMilli(s.Stalls[0].TSMS)) > 1100*time.Millisecond) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	go burner(n)
	select {
	case <-ended:
	case <-ctx.Done():
		fmt.Fprintln(os.Stderr, "no stall_ended event")
	}
	cancel()
	if err := <-done; err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// burner runs three bursts of n spin iterations.
func burner(n int) {
	fmt.Fprintln(os.Stderr, "burner done", burst(n, 3)&1)
}

// burst spins left times, yielding the P between spins, so the monitor
// beats late between them: one stall episode of several late beats.
//
//go:noinline
func burst(n, left int) int {
	x := 0
	for i := range left {
		if i > 0 {
			runtime.Gosched()
		}
		x += spin(n)
	}
	return x
}

// spinFor calibrates how many spin iterations take about d.
func spinFor(d time.Duration) int {
	const probe = 1 << 22
	best := time.Duration(1<<63 - 1)
	for range 5 {
		start := time.Now()
		spin(probe)
		best = min(best, time.Since(start))
	}
	return int(float64(probe) * float64(d) / float64(max(best, time.Microsecond)))
}

// spin loops without calls, so it holds its P until it returns when
// asynchronous preemption is off.
//
//go:noinline
func spin(n int) int {
	x := 0
	for i := range n {
		x = x*31 + i
	}
	return x
}
