package kafka

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"svc/worker/config"
	"svc/worker/workertest"
	"svc/worker/workertest/wait"
)

// ktFlowOf is what worker w's fleet card says of its partitions: the
// paused and stalled ones, read from its own state as its card writer
// reads its metrics.
func ktFlowOf(w *ktWorker) PartitionFlow {
	f := PartitionFlow{Paused: []int32{}, Stalled: []int32{}}
	for _, r := range w.Src.partitionRows() {
		if r.Paused {
			f.Paused = append(f.Paused, r.Partition)
		}
		if r.Stalled {
			f.Stalled = append(f.Stalled, r.Partition)
		}
	}
	return f
}

// ktGroupRow finds partition p in the whole group's view.
func ktGroupRow(g GroupState, p int32) (GroupPartition, bool) {
	for _, r := range g.GroupPartitions {
		if r.Partition == p {
			return r, true
		}
	}
	return GroupPartition{}, false
}

// TestWholeGroupLag: one worker answers for every partition of the group,
// its own and another worker's: while b holds its partitions under a
// consume pause, a's group view lists b's partitions with b as owner,
// their committed offset, high watermark and growing lag, paused as b's
// card says, and the total lag of the group; a's own partitions drain to
// lag 0. svc_consumer_lag carries the topic and the group, and a exports
// only its own partitions (each partition counted once across the fleet).
func TestWholeGroupLag(t *testing.T) {
	if testing.Short() {
		t.Skip("two workers and a paused member watched over timed lag rounds: runs in the full suite")
	}
	t.Parallel()
	c := ktCluster(t, 4)
	addrs := c.ListenAddrs()
	exe := workertest.EchoScript(t)
	cfgA := ktPauseConfig(t, addrs, exe)
	group := cfgA.Sources.Kafka.Group
	a := ktNew(t, cfgA)
	a.Src.lagEvery = 100 * time.Millisecond
	cfgB := ktPauseConfig(t, addrs, exe)
	cfgB.Sources.Kafka.Group = group
	b := ktNew(t, cfgB)
	b.Src.lagEvery = 100 * time.Millisecond
	a.Src.SetPeerFlow(func() map[string]PartitionFlow {
		return map[string]PartitionFlow{cfgB.Worker.Name: ktFlowOf(b)}
	})
	a.Start()
	a.WaitJoined()
	b.Start()
	wait.For(t, ktWait, "a and b share the 4 partitions", func() (bool, string) {
		return len(a.Owned()) > 0 && len(b.Owned()) > 0 && len(a.Owned())+len(b.Owned()) == 4, fmt.Sprintf("a %v, b %v", a.Owned(), b.Owned())
	})
	if _, err := b.Src.Pause(600); err != nil {
		t.Fatal(err)
	}
	bParts := b.Owned()
	prod := ktManual(t, addrs)
	round := func(n int) {
		var recs []*kgo.Record
		for p := range int32(4) {
			recs = append(recs, ktPartitioned(p, int(p)*1000+n*10, 3, -1)...)
		}
		ktProduce(t, prod, recs)
	}
	var last int64
	for n := 1; n <= 2; n++ {
		round(n)
		wantB := int64(3 * n)
		wait.For(t, ktWait, fmt.Sprintf("round %d: a's view of the whole group", n), func() (bool, string) {
			g, err := a.Src.GroupState(t.Context())
			if err != nil {
				return false, err.Error()
			}
			if len(g.GroupPartitions) != 4 {
				return false, fmt.Sprintf("group partitions %+v", g.GroupPartitions)
			}
			var total int64
			for _, r := range g.GroupPartitions {
				if r.Lag == nil || r.HighWatermark == nil || r.Owner == nil || r.Unowned {
					return false, fmt.Sprintf("partition %+v lacks its offsets or owner", r)
				}
				total += *r.Lag
				mineB := slices.Contains(bParts, r.Partition)
				switch {
				case mineB && (r.Mine || r.Owner.Worker != cfgB.Worker.Name || *r.Lag != wantB || r.Paused == nil || !*r.Paused || r.Stalled == nil || *r.Stalled):
					return false, fmt.Sprintf("b's partition %d = %+v (owner %+v), want b as owner, lag %d, paused", r.Partition, r, *r.Owner, wantB)
				case !mineB && (!r.Mine || r.Owner.Worker != cfgA.Worker.Name || *r.Lag != 0 || r.Paused == nil || *r.Paused):
					return false, fmt.Sprintf("a's partition %d = %+v, want a as owner, lag 0, flowing", r.Partition, r)
				}
			}
			if g.TotalLag == nil || *g.TotalLag != total || total != wantB*int64(len(bParts)) {
				return false, fmt.Sprintf("total lag %v, rows add to %d, want %d", g.TotalLag, total, wantB*int64(len(bParts)))
			}
			last = total
			return true, ""
		})
	}
	if last == 0 {
		t.Fatal("no lag seen")
	}
	for _, p := range a.Owned() {
		if got := a.Metric("svc_consumer_lag", "topic", ktIn, "group", group, "partition", strconv.Itoa(int(p))); got != 0 {
			t.Errorf("a's svc_consumer_lag{topic=%s,group=%s,partition=%d} = %v, want 0", ktIn, group, p, got)
		}
	}
	if got := a.Metric("svc_consumer_lag"); got != 0 {
		t.Errorf("a's svc_consumer_lag summed = %v, want 0: b's partitions are b's to export", got)
	}
	wait.For(t, ktWait, "b exporting the lag of the messages it holds", func() (bool, string) {
		got := b.Metric("svc_consumer_lag", "topic", ktIn, "group", group)
		return got == float64(last), fmt.Sprintf("b's svc_consumer_lag{topic,group} summed = %v, want %d", got, last)
	})
	// b resumes: the whole group's lag falls to 0 on a's view too.
	if _, err := b.Src.Resume(); err != nil {
		t.Fatal(err)
	}
	wait.For(t, ktWait, "the group's lag back to 0 after b's resume", func() (bool, string) {
		g, err := a.Src.GroupState(t.Context())
		return err == nil && g.TotalLag != nil && *g.TotalLag == 0, fmt.Sprintf("total lag %v (%v)", g.TotalLag, err)
	})
}

// ktStaticConfig is a static member (startup alignment on, every second)
// of group with a long session.
func ktStaticConfig(t testing.TB, addrs []string, group string, session time.Duration) *config.Config {
	cfg := ktConfig(t, addrs, workertest.EchoScript(t))
	cfg.Sources.Kafka.Group = group
	cfg.Sources.Kafka.StartupAlignEnabled, cfg.Sources.Kafka.StartupAlignSeconds = true, 1
	cfg.Sources.Kafka.ClientConfig["session.timeout.ms"] = strconv.Itoa(int(session.Milliseconds()))
	return cfg
}

// TestUnownedSinceAfterMemberStops: a static member that stops cleanly
// with sources.kafka.leave_group_on_shutdown = false stays in the group
// until its session times out; the live worker shows its partitions as
// unowned since about when it stopped, held by the stopped member, with
// their lag growing as messages arrive.
func TestUnownedSinceAfterMemberStops(t *testing.T) {
	if testing.Short() {
		t.Skip("two static members and a stopped member left in the group: runs in the full suite")
	}
	t.Parallel()
	c := ktCluster(t, 4)
	addrs := c.ListenAddrs()
	group := "g-" + workertest.UniqueName("unowned")
	cfgA := ktStaticConfig(t, addrs, group, 45*time.Second)
	cfgB := ktStaticConfig(t, addrs, group, 45*time.Second)
	cfgB.Sources.Kafka.LeaveGroupOnShutdown = false
	a := ktStart(t, cfgA)
	var bStopped atomic.Bool
	a.Src.SetLiveness(func() map[string]bool { return map[string]bool{cfgB.Worker.Name: !bStopped.Load()} })
	a.Src.lagEvery = 100 * time.Millisecond
	a.WaitJoined()
	b := ktStart(t, cfgB)
	var bParts []int32
	wait.For(t, ktWait, "a and b share the 4 partitions, the group describing both", func() (bool, string) {
		g, err := a.Src.GroupState(t.Context())
		bParts = b.Owned()
		bHolds := 0
		for _, m := range g.Members {
			if m.Worker == cfgB.Worker.Name {
				bHolds = len(m.Partitions)
			}
		}
		return err == nil && len(a.Owned()) > 0 && len(bParts) > 0 && len(a.Owned())+len(bParts) == 4 && bHolds == len(bParts),
			fmt.Sprintf("a %v, b %v, members %+v (%v)", a.Owned(), bParts, g.Members, err)
	})
	stopAt := time.Now()
	b.Stop()
	bStopped.Store(true)
	if strings.Contains(b.Logs.String(), "kafka_group_left") {
		t.Errorf("b left the group with leave_group_on_shutdown false:\n%s", b.Logs.String())
	}
	var recs []*kgo.Record
	for _, p := range bParts {
		recs = append(recs, ktPartitioned(p, int(p)*100, 4, -1)...)
	}
	ktProduce(t, ktManual(t, addrs), recs)
	wait.For(t, ktWait, "b's partitions unowned since it stopped, with their lag", func() (bool, string) {
		g, err := a.Src.GroupState(t.Context())
		if err != nil {
			return false, err.Error()
		}
		for _, p := range bParts {
			r, ok := ktGroupRow(g, p)
			if !ok || !r.Unowned || r.Mine || r.UnownedSinceMS < stopAt.Add(-time.Second).UnixMilli() || r.UnownedSinceMS > time.Now().UnixMilli() ||
				r.Owner == nil || r.Owner.Worker != cfgB.Worker.Name || r.Lag == nil || *r.Lag < 4 || r.Paused != nil {
				return false, fmt.Sprintf("partition %d = %+v, want unowned since b stopped (%d), held by b, lag 4 or more", p, r, stopAt.UnixMilli())
			}
		}
		return true, ""
	})
}

// TestCleanLeaveReassignsAtOnce: a static member's clean shutdown leaves
// the group (sources.kafka.leave_group_on_shutdown, the default), so its
// partitions go to the other worker, which consumes what arrives on them,
// long before the 5-minute session would have timed out.
func TestCleanLeaveReassignsAtOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("two static members and a rebalance on leave: runs in the full suite")
	}
	t.Parallel()
	c := ktCluster(t, 4)
	addrs := c.ListenAddrs()
	group := "g-" + workertest.UniqueName("leave")
	const session = 5 * time.Minute // kfake's longest; far past ktWait
	a := ktStart(t, ktStaticConfig(t, addrs, group, session))
	a.WaitJoined()
	b := ktStart(t, ktStaticConfig(t, addrs, group, session))
	var bParts []int32
	wait.For(t, ktWait, "a and b share the 4 partitions", func() (bool, string) {
		bParts = b.Owned()
		return len(a.Owned()) > 0 && len(bParts) > 0 && len(a.Owned())+len(bParts) == 4, fmt.Sprintf("a %v, b %v", a.Owned(), bParts)
	})
	stopAt := time.Now()
	b.Stop()
	if !strings.Contains(b.Logs.String(), "kafka_group_left") {
		t.Errorf("b's logs lack kafka_group_left:\n%s", workertest.Tail(b.Logs.String(), 30))
	}
	p := bParts[0]
	ktProduce(t, ktManual(t, addrs), ktPartitioned(p, 500, 1, -1))
	wait.For(t, ktWait, "a owns all 4 partitions and consumed the message sent to b's", func() (bool, string) {
		committed := ktCommitted(t, ktAdmin(t, addrs), group)
		return len(a.Owned()) == 4 && committed[p] >= 1, fmt.Sprintf("a owns %v, committed %v", a.Owned(), committed)
	})
	if took := time.Since(stopAt); took >= session {
		t.Errorf("reassignment took %s, not before the %s session timeout", took, session)
	}
	var found bool
	for _, r := range ktReadAll(t, addrs, ktOut) {
		found = found || ktID(r.Value) == 500
	}
	if !found {
		t.Error("the message sent to b's partition after b left has no result on the sink")
	}
}
