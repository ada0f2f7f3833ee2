package gcfloor

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

func TestPercent(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		base, minGoal uint64
		want          int
	}{
		{0, 20 * mib, 100},          // nothing measured yet: the default
		{1 * mib, 20 * mib, 400},    // tiny heap: at most MaxPercent (goal 5 MiB)
		{4 * mib, 20 * mib, 400},    // goal 20 MiB
		{5 * mib, 20 * mib, 300},    // the HTTP path: goal 20 MiB
		{8 * mib, 20 * mib, 150},    // goal 20 MiB
		{9 * mib, 20 * mib, 122},    // rounded down
		{10 * mib, 20 * mib, 100},   // from here on 2 × the heap is larger
		{11 * mib, 20 * mib, 100},   // a Kafka backlog: the default
		{200 * mib, 20 * mib, 100},  // never below 100
		{3 * mib, 6 * mib, 100},     // another floor
		{2 * mib, 6 * mib, 200},     // another floor
		{mib / 2, 100 * mib, 400},   // never above MaxPercent
		{10*mib - 1, 20 * mib, 100}, // (20 − 10) / 10 rounds to 100
	} {
		if got := Percent(c.base, c.minGoal); got != c.want {
			t.Errorf("Percent(%d, %d) = %d, want %d", c.base, c.minGoal, got, c.want)
		}
	}
}

// gogc reads the collector's GOGC as the runtime uses it.
func gogc() int {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return int(s[0].Value.Uint64())
}

// waitGOGC collects until GOGC satisfies ok: the floor adjusts from a
// cleanup that runs after a collection, on its own goroutine.
func waitGOGC(t *testing.T, what string, ok func(int) bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok(gogc()) {
		if time.Now().After(deadline) {
			t.Fatalf("GOGC is %d, want %s", gogc(), what)
		}
		runtime.GC()
		time.Sleep(5 * time.Millisecond)
	}
}

var keep [][]byte

// A small heap gets the floor, a large one the default, and stop puts
// back what GOGC was.
func TestFloorFollowsTheLiveHeap(t *testing.T) {
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	defer debug.SetGCPercent(debug.SetGCPercent(150)) // what the floor must put back
	stop := Start(MinGoal)
	waitGOGC(t, "above 100 with a small live heap", func(p int) bool { return p > 100 })
	// A live heap larger than the headroom: the default again.
	for range 64 {
		keep = append(keep, make([]byte, 1<<20))
	}
	waitGOGC(t, "100 with 64 MiB live", func(p int) bool { return p == 100 })
	keep = nil
	waitGOGC(t, "above 100 once the heap is small again", func(p int) bool { return p > 100 })
	stop()
	if p := gogc(); p != 150 {
		t.Fatalf("after stop GOGC is %d, want 150 (what it was)", p)
	}
	runtime.GC()
	time.Sleep(20 * time.Millisecond)
	if p := gogc(); p != 150 {
		t.Fatalf("a collection after stop changed GOGC to %d", p)
	}
}

// An operator's GOGC or GOMEMLIMIT leaves the collector alone.
func TestOperatorSettingsWin(t *testing.T) {
	for _, env := range []string{"GOGC", "GOMEMLIMIT"} {
		t.Run(env, func(t *testing.T) {
			t.Setenv("GOGC", "")
			t.Setenv("GOMEMLIMIT", "")
			t.Setenv(env, map[string]string{"GOGC": "150", "GOMEMLIMIT": "1GiB"}[env])
			defer debug.SetGCPercent(debug.SetGCPercent(150))
			stop := Start(MinGoal)
			defer stop()
			for range 5 {
				runtime.GC()
				time.Sleep(5 * time.Millisecond)
			}
			if p := gogc(); p != 150 {
				t.Fatalf("GOGC is %d with %s set, want the operator's 150", p, env)
			}
		})
	}
}
