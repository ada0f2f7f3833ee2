package kafka

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"svc/worker/workertest"
	"svc/worker/workertest/wait"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestKafkaLagSeconds: while a consume pause holds intake, messages
// produced with a timestamp two minutes old make the group view and
// svc_consumer_lag_seconds say the partition is about two minutes behind,
// and the drain estimate says nothing is consumed; the record is read once
// however many lag rounds pass while the committed offset stays put; after
// the resume the lag in time is 0 and the partition is caught up.
func TestKafkaLagSeconds(t *testing.T) {
	t.Parallel()
	c := ktCluster(t, 2)
	addrs := c.ListenAddrs()
	cfg := ktPauseConfig(t, addrs, workertest.EchoScript(t))
	w := ktNew(t, cfg)
	w.Src.lagEvery = 100 * time.Millisecond
	w.Src.offsets.clock.every = 200 * time.Millisecond
	w.Start()
	w.WaitJoined()
	if _, err := w.Src.Pause(600); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-2 * time.Minute).Truncate(time.Millisecond)
	recs := ktPartitioned(0, 0, 5, -1)
	for i, r := range recs {
		r.Timestamp = old.Add(time.Duration(i) * time.Second)
	}
	ktProduce(t, ktManual(t, addrs), recs)

	state := func() GroupState {
		ctx, cancel := context.WithTimeout(t.Context(), ktWait)
		defer cancel()
		g, err := w.Src.GroupState(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	wait.For(t, ktWait, "partition 0 two minutes behind, not consuming", func() (bool, string) {
		g := state()
		p := g.GroupPartitions[0]
		ok := p.Lag != nil && *p.Lag == 5 && p.OldestUnconsumedMS != nil && *p.OldestUnconsumedMS == old.UnixMilli() &&
			p.LagSeconds != nil && math.Abs(*p.LagSeconds-120) < 10 && p.Drain != nil && p.Drain.State == DrainStuck &&
			g.LagSeconds != nil && *g.LagSeconds == *p.LagSeconds && g.Drain != nil && g.Drain.State == DrainStuck && len(p.LagTrend) >= 2
		return ok, fmt.Sprintf("%+v; group %v %+v", p, g.LagSeconds, g.Drain)
	})
	secs := ktSeries(t, w.Reg, "svc_consumer_lag_seconds")
	if v, ok := secs[0]; !ok || math.Abs(v-120) > 10 || secs[1] != 0 {
		t.Errorf("svc_consumer_lag_seconds = %v, want about 120 for partition 0 and 0 for partition 1 (no lag)", secs)
	}
	// Many lag rounds (every 100 ms, re-reads allowed every 200 ms) with
	// the committed offset still: the record is not read again.
	reads := w.Src.offsets.clock.reads.Load()
	time.Sleep(time.Second)
	if got := w.Src.offsets.clock.reads.Load(); got != reads || reads != 1 {
		t.Errorf("records read for the lag in time: %d, then %d a second later, want 1 and no more while the committed offset stays", reads, got)
	}

	if _, err := w.Src.Resume(); err != nil {
		t.Fatal(err)
	}
	wait.For(t, ktWait, "partition 0 caught up after the resume", func() (bool, string) {
		g := state()
		p := g.GroupPartitions[0]
		// The test's sample ring spans about 3 s (a sample every 100 ms):
		// on a loaded host the consumption may leave it before a check
		// sees caught_up, and then the partition is idle (nothing
		// consumed or produced in the window, lag 0). Both say caught up.
		caughtUp := p.Drain != nil && (p.Drain.State == DrainCaughtUp && p.Drain.ConsumedPerS > 0 || p.Drain.State == DrainIdle)
		ok := p.Lag != nil && *p.Lag == 0 && p.LagSeconds != nil && *p.LagSeconds == 0 && caughtUp &&
			g.LagSeconds != nil && *g.LagSeconds == 0
		return ok, fmt.Sprintf("%+v; group %v %+v", p, g.LagSeconds, g.Drain)
	})
	if v := ktSeries(t, w.Reg, "svc_consumer_lag_seconds")[0]; v != 0 {
		t.Errorf("svc_consumer_lag_seconds{partition=0} after the resume = %v, want 0", v)
	}
}

// TestDrainOf: the time-to-drain estimate from a partition's samples.
func TestDrainOf(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	now := at(120)
	cases := []struct {
		name    string
		samples []lagSample
		lag     int64
		state   string
		eta     float64 // 0: none
	}{
		{"one sample", []lagSample{{at(120), 10, 20}}, 10, DrainUnknown, 0},
		{"idle", []lagSample{{at(0), 10, 10}, {at(120), 10, 10}}, 0, DrainIdle, 0},
		{"caught up", []lagSample{{at(0), 10, 10}, {at(120), 50, 50}}, 0, DrainCaughtUp, 0},
		// 360 out and 120 in over 120 s: 2/s net, 360 left: 3 minutes.
		{"catching up", []lagSample{{at(0), 0, 600}, {at(60), 180, 660}, {at(120), 360, 720}}, 360, DrainCatchingUp, 180},
		{"falling behind", []lagSample{{at(0), 0, 100}, {at(120), 60, 400}}, 340, DrainFallingBehind, 0},
		{"not consuming", []lagSample{{at(0), 5, 10}, {at(120), 5, 10}}, 5, DrainStuck, 0},
		{"holding", []lagSample{{at(0), 0, 100}, {at(120), 120, 220}}, 100, DrainHolding, 0},
		// Samples older than the window do not count.
		{"old samples", []lagSample{{at(-600), 0, 0}, {at(120), 100, 100}}, 0, DrainCaughtUp, 0},
	}
	for _, c := range cases {
		d := drainOf(c.samples, now, c.lag)
		if d.State != c.state || (c.eta == 0) != (d.Seconds == nil) || d.Seconds != nil && math.Abs(*d.Seconds-c.eta) > 0.01 {
			t.Errorf("%s: drain = %+v (seconds %v), want %s with eta %v", c.name, d, d.Seconds, c.state, c.eta)
		}
	}
}

// BenchmarkAgeRound measures one round of the lag-in-time reads with 6
// lagging partitions of 1 KiB records, every partition read (as when each
// committed offset moved since the last round): what the lag loop spends
// every 10 s at most on a busy worker with 6 partitions.
func BenchmarkAgeRound(b *testing.B) {
	c := ktCluster(b, 6)
	addrs := c.ListenAddrs()
	cfg := ktPauseConfig(b, addrs, workertest.EchoScript(b))
	w := ktNew(b, cfg)
	w.Src.lagEvery = time.Hour // the benchmark calls the rounds
	w.Start()
	w.WaitJoined()
	if _, err := w.Src.Pause(3600); err != nil {
		b.Fatal(err)
	}
	var recs []*kgo.Record
	for p := range int32(6) {
		for i := range 200 {
			r := ktMsg(int(p)*1000+i, "", false)
			r.Partition, r.Value = p, bytes.Repeat([]byte("x"), 1024)
			recs = append(recs, r)
		}
	}
	ktProduce(b, ktManual(b, addrs), recs)
	ctx := b.Context()
	if err := w.Src.readOffsets(ctx); err != nil {
		b.Fatal(err)
	}
	w.Src.offsets.clock.every = time.Nanosecond
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		w.Src.offsets.clock.mu.Lock()
		for _, pc := range w.Src.offsets.clock.parts {
			pc.ageKnown = false
		}
		w.Src.offsets.clock.mu.Unlock()
		before := w.Src.offsets.clock.reads.Load()
		w.Src.ageRound(ctx)
		if got := w.Src.offsets.clock.reads.Load() - before; got != 6 {
			b.Fatalf("a round read %d partitions, want 6", got)
		}
	}
}
