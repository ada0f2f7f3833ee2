package kafka

import (
	"context"
	"fmt"
	"testing"
	"time"

	"svc/worker/workertest"
	"svc/worker/workertest/wait"
)

// TestKafkaHeadOfLine: while the executor fails every first attempt and
// holds every second one, partition 0's five messages of key "stuck" run
// one at a time, so the group view names "stuck" as holding partition 0,
// running since it started with its task id at attempt 2 (the running
// tasks' registry joined by task id), 4 messages behind it and holding the
// commit; partition 1's messages of five different keys all run, none
// behind another, and the one at the oldest offset holds its commit. Once
// the gate opens nothing holds.
func TestKafkaHeadOfLine(t *testing.T) {
	t.Parallel()
	c := ktCluster(t, 2)
	addrs := c.ListenAddrs()
	gate := workertest.NewGate(t)
	exe := workertest.Script(t, `[ "$SVC_ATTEMPT" = 1 ] && { cat >/dev/null; exit 1; }
exec `+gate.Path+`
`)
	cfg := ktConfig(t, addrs, exe)
	cfg.Executor.PoolSize = 8
	cfg.Pipeline.MaxInFlight = 10
	w := ktNew(t, cfg)
	w.Start()
	w.WaitJoined()
	before := time.Now().UnixMilli()
	recs := ktPartitioned(0, 0, 5, -1)
	for _, r := range recs {
		r.Key = []byte("stuck")
	}
	other := ktPartitioned(1, 100, 5, -1)
	for i, r := range other {
		r.Key = []byte(fmt.Sprint("free-", i))
	}
	ktProduce(t, ktManual(t, addrs), append(recs, other...))

	state := func() GroupState {
		ctx, cancel := context.WithTimeout(t.Context(), ktWait)
		defer cancel()
		g, err := w.Src.GroupState(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	wait.For(t, ktWait, "key stuck holding partition 0, partition 1's keys all running", func() (bool, string) {
		g := state()
		h0, h1 := g.GroupPartitions[0].HeadOfLine, g.GroupPartitions[1].HeadOfLine
		if h0 == nil || h1 == nil || len(h0.Keys) != 1 || len(h1.Keys) != 1 {
			return false, fmt.Sprintf("%+v %+v", h0, h1)
		}
		k, k1 := h0.Keys[0], h1.Keys[0]
		ok := k.Key == "stuck" && k.KeyEncoding == "utf-8" && k.Offset == 0 && k.State == "running" && k.SinceMS != nil && *k.SinceMS >= before &&
			k.Behind == 4 && k.HoldsCommit && len(k.TaskIDs) == 1 && k.TaskIDs[0] != "" && k.Attempt != nil && *k.Attempt == 2 && !k.AttemptEnded && h0.KeysHolding == 1 &&
			h0.OldestUnfinishedOffset != nil && *h0.OldestUnfinishedOffset == 0 && h0.Running == 1 && h0.Waiting == 4 &&
			k1.Key == "free-0" && k1.Behind == 0 && k1.HoldsCommit && k1.State == "running" && k1.Attempt != nil && *k1.Attempt == 2 && h1.Running == 5 && h1.Waiting == 0
		return ok, fmt.Sprintf("%+v %+v attempt %v / %+v %+v", h0, k, ptr(k.Attempt), h1, k1)
	})
	gate.Open(t)
	wait.For(t, ktWait, "nothing holding once the gate opened", func() (bool, string) {
		g := state()
		h0, h1 := g.GroupPartitions[0].HeadOfLine, g.GroupPartitions[1].HeadOfLine
		return h0 != nil && h1 != nil && len(h0.Keys) == 0 && len(h1.Keys) == 0 && h0.OldestUnfinishedOffset == nil && h0.Waiting == 0,
			fmt.Sprintf("%+v %+v", h0, h1)
	})
}

// TestShowKey: keys as the head-of-line view shows them.
func TestShowKey(t *testing.T) {
	long := string(make([]byte, 300))
	for _, c := range []struct {
		in, want, enc string
		cut           bool
	}{
		{"order-7", "order-7", "utf-8", false},
		{"\xff\x00", "/wA=", "base64", false},
		{long, long[:256], "utf-8", true},
		{string(make([]byte, 255)) + "é", string(make([]byte, 255)), "utf-8", true}, // a rune cut in half is dropped
	} {
		got, enc, cut := showKey(c.in)
		if got != c.want || enc != c.enc || cut != c.cut {
			t.Errorf("showKey(%q) = %q %s %v, want %q %s %v", c.in, got, enc, cut, c.want, c.enc, c.cut)
		}
	}
}

func ptr(p *int) any {
	if p == nil {
		return nil
	}
	return *p
}
