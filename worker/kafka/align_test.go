package kafka

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"svc/worker/workertest"
	"svc/worker/workertest/wait"
)

func TestKafkaAlignDelay(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		now   time.Time
		align int
		want  time.Duration
	}{
		{"on a multiple waits a whole period", time.Unix(100, 0), 10, 10 * time.Second},
		{"mid period", time.Unix(101, 500_000_000), 10, 8500 * time.Millisecond},
		{"just before a multiple", time.Unix(109, 999_000_000), 10, time.Millisecond},
		{"minute", time.Unix(1_700_000_019, 0), 60, 21 * time.Second},
		{"one second", time.Unix(5, 250_000_000), 1, 750 * time.Millisecond},
		{"period not dividing a minute counts from the epoch", time.Unix(71, 0), 7, 6 * time.Second},
		{"time zone does not matter", time.Unix(101, 0).In(time.FixedZone("x", 5*3600+1800)), 10, 9 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := alignDelay(tc.now, tc.align); got != tc.want {
				t.Errorf("alignDelay(%v, %d) = %v, want %v", tc.now, tc.align, got, tc.want)
			}
		})
	}
	// Workers starting anywhere in one period join at the same instant.
	base := time.Unix(1_700_000_000, 0)
	for ms := 0; ms < 10_000; ms += 997 {
		now := base.Add(time.Duration(ms) * time.Millisecond)
		if at := now.Add(alignDelay(now, 10)); !at.Equal(base.Add(10 * time.Second)) {
			t.Errorf("a worker starting at +%dms joins at %v, want %v", ms, at, base.Add(10*time.Second))
		}
	}
}

// TestKafkaReadyBeforeJoin: a worker with the Kafka source is not ready
// until its consumer joined the group, from the moment it is built.
func TestKafkaReadyBeforeJoin(t *testing.T) {
	t.Parallel()
	w := ktNew(t, ktConfig(t, []string{"127.0.0.1:1"}, workertest.EchoScript(t)))
	if ok, reasons := w.App.Ready(); ok {
		t.Errorf("Ready() = true before Run, want false with a kafka reason")
	} else if !strings.Contains(fmt.Sprint(reasons), "kafka") {
		t.Errorf("Ready() reasons = %v, want one naming kafka", reasons)
	}
}

// TestKafkaAlignedStartup: with startup alignment on, the consumer joins
// at the next multiple of startup_align_seconds, not before, as a static
// member (group.instance.id = worker name).
func TestKafkaAlignedStartup(t *testing.T) {
	t.Parallel()
	c := ktCluster(t, 2)
	addrs := c.ListenAddrs()
	cfg := ktConfig(t, addrs, workertest.EchoScript(t))
	cfg.Sources.Kafka.StartupAlignEnabled = true
	cfg.Sources.Kafka.StartupAlignSeconds = 2
	earliest := time.Now().Truncate(2 * time.Second).Add(2 * time.Second)
	w := ktStart(t, cfg)
	w.WaitJoined()
	joined := time.Now()
	if joined.Before(earliest) {
		t.Errorf("joined at %v, before the aligned instant %v", joined, earliest)
	}
	if ok, reasons := w.App.Ready(); !ok {
		t.Errorf("Ready() = false after the join: %v", reasons)
	}
	logs := w.Logs.Named("kafka_startup_aligned")
	if len(logs) != 1 || logs[0]["instance_id"] != cfg.Worker.Name {
		t.Fatalf("kafka_startup_aligned logs = %v, want one naming instance %s", logs, cfg.Worker.Name)
	}
	d, err := time.ParseDuration(fmt.Sprint(logs[0]["join_in"]))
	if err != nil || d <= 0 || d > 2*time.Second {
		t.Errorf("kafka_startup_aligned join_in = %v, want a delay in (0, 2s]", logs[0]["join_in"])
	}
	logged, _ := time.Parse(time.RFC3339Nano, fmt.Sprint(logs[0]["time"]))
	if at := logged.Add(d); at.UnixMilli()%2000 > 5 && at.UnixMilli()%2000 < 1995 {
		t.Errorf("log time %v + join_in %v = %v, want a multiple of 2 s", logged, d, at)
	}
	assigned := w.Logs.Named("partitions_assigned")
	if len(assigned) == 0 {
		t.Fatal("no partitions_assigned log")
	}
	if at, _ := time.Parse(time.RFC3339Nano, fmt.Sprint(assigned[0]["time"])); at.Before(logged.Add(d)) {
		t.Errorf("partitions assigned at %v, before the aligned instant %v", at, logged.Add(d))
	}

	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	groups, err := ktAdmin(t, addrs).DescribeGroups(ctx, cfg.Sources.Kafka.Group)
	if err != nil {
		t.Fatal(err)
	}
	members := groups[cfg.Sources.Kafka.Group].Members
	if len(members) != 1 || members[0].InstanceID == nil || *members[0].InstanceID != cfg.Worker.Name {
		t.Errorf("group members = %+v, want one static member with instance id %s", members, cfg.Worker.Name)
	}
}

// TestDuplicateNameStopsTheOlderWorker: a second worker under the same
// worker.name joins the group as the same static member; the group fences
// the first one (FENCED_INSTANCE_ID). In both delivery modes the first
// stops consuming, logs it once and reports not ready saying why, instead
// of retrying the refused join every few seconds while looking ready; the
// second takes every partition and nothing is lost.
func TestDuplicateNameStopsTheOlderWorker(t *testing.T) {
	t.Parallel()
	for _, eos := range []bool{false, true} {
		t.Run(map[bool]string{false: "at_least_once", true: "exactly_once"}[eos], func(t *testing.T) {
			t.Parallel()
			c := ktCluster(t, 2)
			addrs := c.ListenAddrs()
			cfg := ktConfig(t, addrs, workertest.EchoScript(t))
			if eos {
				cfg = eosConfig(t, addrs, workertest.EchoScript(t))
			}
			cfg.Sources.Kafka.StartupAlignEnabled, cfg.Sources.Kafka.StartupAlignSeconds = true, 1
			older := ktStart(t, cfg)
			older.WaitJoined()
			prod := ktClient(t, addrs)
			batch := eosBatches(t, prod, 13, nil)
			batch(0, 300)
			ktWaitCommitted(t, ktAdmin(t, addrs), cfg.Sources.Kafka.Group)

			same := *cfg
			newer := ktStart(t, &same)
			newer.WaitJoined()
			want := "kafka_member_fenced"
			if eos {
				want = "kafka_producer_fenced"
			}
			wait.For(t, ktWait, "the older worker stopped, not ready", func() (bool, string) {
				ready, reasons := older.App.Ready()
				return !ready && strings.Contains(fmt.Sprint(reasons), "fenced") && len(older.Logs.Named(want)) > 0,
					fmt.Sprintf("ready %v %v, %d %s logs", ready, reasons, len(older.Logs.Named(want)), want)
			})
			batch(300, 300)
			ktWaitCommitted(t, ktAdmin(t, addrs), cfg.Sources.Kafka.Group)
			if n := len(older.Logs.Named(want)); n != 1 {
				t.Errorf("%s logged %d times, want once", want, n)
			}
			if ready, reasons := newer.App.Ready(); !ready {
				t.Errorf("the newer worker is not ready: %v", reasons)
			}
			newer.Stop()
			older.Stop()
			if eos {
				eosCheckExactlyOnce(t, 600, func(int) bool { return false }, ktReadCommitted(t, addrs, ktOut), ktReadCommitted(t, addrs, ktDLQ))
				return
			}
			out, dlq := ktCollect(t, addrs, addrs)
			ktCheckAllOut(t, ktIDs(0, 600), out, dlq)
		})
	}
}
