package kafka

import (
	"fmt"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"svc/worker/workertest"
	"svc/worker/workertest/wait"
)

// TestOrphanedPartitionsReported: a worker SIGKILLed while it owns
// partitions keeps them in the group until its session times out; its
// partitions are consumed by nobody meanwhile. The live worker reports
// them with their lag (GroupState.Orphaned and svc_consumer_lag_orphaned,
// held_by dead_member) as soon as the fleet says the other is gone, and
// stops once the group gives them to a live member (full runs only: that
// waits out b's 45 s session).
func TestOrphanedPartitionsReported(t *testing.T) {
	t.Parallel()
	c := ktCluster(t, 4)
	addrs := c.ListenAddrs()
	exe := workertest.EchoScript(t)
	// A long session, so the dead member holds its partitions for a while.
	long := func(name string) string {
		cfg := ktConfig(t, addrs, exe)
		cfg.Worker.Name = name
		cfg.Sources.Kafka.Group = "g-orphans-" + name[:len(name)-2]
		cfg.Sources.Kafka.ClientConfig["session.timeout.ms"] = "45000"
		// Static membership: killed, b keeps its partitions and the group
		// stays stable (no rebalance) until its session ends.
		cfg.Sources.Kafka.StartupAlignEnabled, cfg.Sources.Kafka.StartupAlignSeconds = true, 1
		cfg.Resolve()
		return ktWriteConfig(t, cfg)
	}
	base := workertest.UniqueName("orph")
	cfgB := long(base + "-b")
	live := ktConfig(t, addrs, exe)
	live.Worker.Name = base + "-a"
	live.Sources.Kafka.Group = "g-orphans-" + base
	live.Sources.Kafka.ClientConfig["session.timeout.ms"] = "20000"
	a := ktStart(t, live)
	var bDead atomic.Bool
	a.Src.SetLiveness(func() map[string]bool { return map[string]bool{base + "-b": !bDead.Load()} })
	a.WaitJoined()
	b := ktChild(t, cfgB, ktChildLog(t))
	wait.For(t, ktWait, "both workers own partitions", func() (bool, string) {
		g, err := a.Src.GroupState(t.Context())
		owned, bHolds := len(a.Owned()), 0
		for _, m := range g.Members {
			if m.Worker == base+"-b" {
				bHolds = len(m.Partitions)
			}
		}
		return err == nil && len(g.Members) == 2 && owned > 0 && owned < 4 && bHolds > 0,
			fmt.Sprintf("members %+v, a owns %d (%v)", g.Members, owned, err)
	})
	if err := b.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = b.Wait()
	bDead.Store(true)
	// Messages for every partition: b's are not consumed while it holds them.
	prod := ktManual(t, addrs)
	var recs []*kgo.Record
	for p := range int32(4) {
		for i := range 5 {
			recs = append(recs, &kgo.Record{Topic: ktIn, Partition: p, Key: []byte("k"), Value: []byte(fmt.Sprintf("id=%d", int(p)*10+i))})
		}
	}
	ktProduce(t, prod, recs)
	var g GroupState
	seen := map[string]bool{}
	defer func() {
		if t.Failed() {
			for d := range seen {
				t.Logf("seen: %s", d)
			}
		}
	}()
	wait.For(t, ktWait, "b's partitions reported as orphaned with their lag", func() (ok bool, detail string) {
		defer func() {
			if !ok && len(seen) < 20 {
				seen[detail] = true
			}
		}()
		var err error
		if g, err = a.Src.GroupState(t.Context()); err != nil {
			return false, err.Error()
		}
		mine := map[int32]bool{}
		for _, p := range a.Owned() {
			mine[p] = true
		}
		found := 0
		for _, o := range g.Orphaned {
			lag := int64(-1)
			if o.Lag != nil {
				lag = *o.Lag
			}
			if mine[o.Partition] {
				return false, fmt.Sprintf("partition %d is a's and listed as orphaned", o.Partition)
			}
			if o.HeldBy != HeldByDeadMember || o.Holder == nil || o.Holder.Worker != base+"-b" || lag < 5 || o.SinceMS == 0 {
				continue // held by nobody during a rebalance, or by a's own earlier member
			}
			got := a.Metric("svc_consumer_lag_orphaned", "partition", strconv.Itoa(int(o.Partition)), "held_by", HeldByDeadMember)
			if got != float64(lag) {
				return false, fmt.Sprintf("svc_consumer_lag_orphaned{partition=%d} = %v, want %d", o.Partition, got, lag)
			}
			found++
		}
		return found > 0, fmt.Sprintf("orphaned %+v, a owns %v, members %+v", g.Orphaned, mine, g.Members)
	})
	if testing.Short() {
		return
	}
	// The session ends, a takes the partitions: nothing is orphaned.
	wait.For(t, ktWait, "a owns every partition and nothing is orphaned", func() (bool, string) {
		g, err := a.Src.GroupState(t.Context())
		return err == nil && len(a.Owned()) == 4 && len(g.Orphaned) == 0, fmt.Sprintf("a owns %v, orphaned %+v (%v)", a.Owned(), g.Orphaned, err)
	})
}

// alive: this worker's member is alive; an earlier instance of this
// worker's name (a restart after a crash) is dead; the fleet decides for
// the others; a member the fleet does not know counts as alive.
func TestMemberAlive(t *testing.T) {
	t.Parallel()
	s := &Source{wcfg: ktConfig(t, []string{"127.0.0.1:1"}, "/bin/cat")}
	s.wcfg.Worker.Name = "me"
	fleet := map[string]bool{"up": true, "down": false}
	cases := []struct {
		m    Member
		want bool
	}{
		{Member{MemberID: "m1", Worker: "me"}, true},
		{Member{MemberID: "m0", Worker: "me"}, false},
		{Member{MemberID: "m2", Worker: "up"}, true},
		{Member{MemberID: "m3", Worker: "down"}, false},
		{Member{MemberID: "m4", Worker: "stranger"}, true},
		{Member{MemberID: "m5", Worker: ""}, true},
	}
	for _, c := range cases {
		if got := s.alive(c.m, "m1", fleet); got != c.want {
			t.Errorf("alive(%+v) = %v, want %v", c.m, got, c.want)
		}
	}
}

// A clean stop of a dynamic member leaves the group at once: its member is
// gone from the group as soon as the worker stopped, so its partitions do
// not wait for its session to time out.
func TestCleanStopLeavesTheGroup(t *testing.T) {
	t.Parallel()
	c := ktCluster(t, 2)
	addrs := c.ListenAddrs()
	cfg := ktConfig(t, addrs, workertest.EchoScript(t))
	cfg.Sources.Kafka.ClientConfig["session.timeout.ms"] = "30000"
	w := ktStart(t, cfg)
	w.WaitJoined()
	g, err := w.Src.GroupState(t.Context())
	if err != nil || len(g.Members) != 1 {
		t.Fatalf("group = %+v (%v), want this worker as its one member", g, err)
	}
	w.Stop()
	adm := ktAdmin(t, addrs)
	described, err := adm.DescribeGroups(t.Context(), cfg.Sources.Kafka.Group)
	if err != nil {
		t.Fatal(err)
	}
	if d := described[cfg.Sources.Kafka.Group]; len(d.Members) != 0 {
		t.Errorf("members right after a clean stop = %+v, want none (the worker left the group)", d.Members)
	}
}
