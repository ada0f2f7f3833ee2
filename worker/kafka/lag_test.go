package kafka

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"testing"
	"time"

	"svc/worker/workertest"
	"svc/worker/workertest/wait"

	"github.com/prometheus/client_golang/prometheus"
)

// ktSeries returns the value of each sample of family name by its
// partition label.
func ktSeries(t testing.TB, g prometheus.Gatherer, name string) map[int32]float64 {
	t.Helper()
	fams, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]float64{}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "partition" {
					p, _ := strconv.Atoi(l.GetValue())
					out[int32(p)] = m.GetGauge().GetValue()
				}
			}
		}
	}
	return out
}

// TestKafkaConsumerLag follows two assigned partitions through a backlog:
// the lag gauges count from the log start before the first commit and fall
// to 0 as the group commits; in-flight, waiting and paused gauges follow
// the pipeline; the group view says the same with this worker as owner;
// when a second worker takes a partition, the first one's series of it
// disappear.
func TestKafkaConsumerLag(t *testing.T) {
	t.Parallel()
	c := ktCluster(t, 2)
	addrs := c.ListenAddrs()
	gate := workertest.NewGate(t)
	cfg := ktPauseConfig(t, addrs, gate.Path)
	cfg.Executor.PoolSize = 2
	cfg.Pipeline.MaxInFlight = 3
	cfg.Sources.Kafka.StartupAlignEnabled = true // static membership: the owner has an instance id
	cfg.Sources.Kafka.StartupAlignSeconds = 1
	group := cfg.Sources.Kafka.Group
	w := ktNew(t, cfg)
	if _, err := w.Src.GroupState(t.Context()); !errors.Is(err, ErrConsumerNotRunning) {
		t.Errorf("GroupState before Run = %v, want ErrConsumerNotRunning", err)
	}
	w.Src.lagEvery = 100 * time.Millisecond
	w.Start()
	w.WaitJoined()

	recs := append(ktPartitioned(0, 0, 10, -1), ktPartitioned(1, 100, 4, -1)...)
	ktProduce(t, ktManual(t, addrs), recs)
	want := map[int32]float64{0: 10, 1: 4}
	wait.For(t, ktWait, "lag and high watermarks of the backlog", func() (bool, string) {
		lag, hwm := ktSeries(t, w.Reg, "svc_consumer_lag"), ktSeries(t, w.Reg, "svc_partition_high_watermark")
		return reflect.DeepEqual(lag, want) && reflect.DeepEqual(hwm, want), fmt.Sprintf("lag %v, high watermarks %v", lag, hwm)
	})
	wait.For(t, ktWait, "max_in_flight messages run, the rest waits", func() (bool, string) {
		run, waiting := ktSeries(t, w.Reg, "svc_partition_messages_in_flight"), ktSeries(t, w.Reg, "svc_partition_messages_waiting")
		return run[0]+run[1] == 3 && waiting[0]+waiting[1] == 11, fmt.Sprintf("in flight %v, waiting %v", run, waiting)
	})
	if got := ktSeries(t, w.Reg, "svc_partition_committed_offset"); len(got) != 0 {
		t.Errorf("svc_partition_committed_offset = %v before any commit, want no series", got)
	}

	ctx, cancel := context.WithTimeout(t.Context(), ktWait)
	defer cancel()
	g, err := w.Src.GroupState(ctx)
	if err != nil {
		t.Fatalf("GroupState = %v", err)
	}
	if g.Group != group || g.Alias != "source" || g.Protocol != "cooperative-sticky" || g.Generation < 1 ||
		g.Owner.Worker != cfg.Worker.Name || g.Owner.MemberID == "" || g.Owner.InstanceID == nil || *g.Owner.InstanceID != cfg.Worker.Name {
		t.Errorf("GroupState = %+v, want group %s, alias source, cooperative-sticky, a generation and this worker as owner with its member and instance id", g, group)
	}
	if time.Since(time.UnixMilli(g.OffsetsReadAtMS)) > time.Minute {
		t.Errorf("offsets_read_at_ms = %d, want the read just made", g.OffsetsReadAtMS)
	}
	if len(g.Partitions) != 2 {
		t.Fatalf("GroupState partitions = %+v, want 0 and 1", g.Partitions)
	}
	for i, p := range g.Partitions {
		end := int64(want[int32(i)])
		if p.Partition != int32(i) || p.CommittedOffset != nil || p.HighWatermark == nil || *p.HighWatermark != end ||
			p.Lag == nil || *p.Lag != end || p.Paused || p.Stalled || !reflect.DeepEqual(p.Owner, g.Owner) {
			t.Errorf("partition %d = %+v, want no commit, high watermark and lag %d, not paused, owned by %+v", i, p, end, g.Owner)
		}
	}

	if _, err := w.Src.Pause(600); err != nil {
		t.Fatal(err)
	}
	if got := ktSeries(t, w.Reg, "svc_partition_paused"); !reflect.DeepEqual(got, map[int32]float64{0: 1, 1: 1}) {
		t.Errorf("svc_partition_paused = %v during a consume pause, want 1 for both", got)
	}
	if g, err := w.Src.GroupState(ctx); err != nil || !g.Partitions[0].Paused || !g.Partitions[1].Paused {
		t.Errorf("GroupState during a consume pause = %+v, %v, want both partitions paused", g.Partitions, err)
	}
	if _, err := w.Src.Resume(); err != nil {
		t.Fatal(err)
	}

	gate.Open(t)
	ktWaitCommitted(t, ktAdmin(t, addrs), group)
	wait.For(t, ktWait, "lag falls to 0 and the commits show", func() (bool, string) {
		lag, committed := ktSeries(t, w.Reg, "svc_consumer_lag"), ktSeries(t, w.Reg, "svc_partition_committed_offset")
		return reflect.DeepEqual(lag, map[int32]float64{0: 0, 1: 0}) && reflect.DeepEqual(committed, want),
			fmt.Sprintf("lag %v, committed %v", lag, committed)
	})
	if got := ktSeries(t, w.Reg, "svc_partition_paused"); !reflect.DeepEqual(got, map[int32]float64{0: 0, 1: 0}) {
		t.Errorf("svc_partition_paused = %v after the resume, want 0 for both", got)
	}

	// A second member takes a partition: the first worker's series cover
	// only what it still owns.
	cfg2 := ktConfig(t, addrs, workertest.EchoScript(t))
	cfg2.Sources.Kafka.Group = group
	other := ktStart(t, cfg2)
	wait.For(t, ktWait, "the partitions are shared and the series follow", func() (bool, string) {
		owned := w.Owned()
		var series []int32
		for p := range ktSeries(t, w.Reg, "svc_partition_high_watermark") {
			series = append(series, p)
		}
		slices.Sort(series)
		return len(owned) == 1 && len(other.Owned()) == 1 && reflect.DeepEqual(series, owned),
			fmt.Sprintf("owned %v (other %v), series of %v", owned, other.Owned(), series)
	})
	w.Stop()
	if _, err := w.Src.GroupState(t.Context()); !errors.Is(err, ErrConsumerNotRunning) {
		t.Errorf("GroupState after the stop = %v, want ErrConsumerNotRunning", err)
	}
	if got := ktSeries(t, w.Reg, "svc_consumer_lag"); len(got) != 0 {
		t.Errorf("svc_consumer_lag = %v after the stop, want no series", got)
	}
}
