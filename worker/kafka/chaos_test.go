package kafka

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"svc/worker/config"
	"svc/worker/workertest"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Sizes of TestKafkaChaos.
const (
	kcMessages = 10_000
	kcKills    = 5
)

// TestKafkaChaos streams 10,000 messages through a worker in a child
// process that is SIGKILLed 5 times at random points of the stream and
// restarted at once, while the broker itself is restarted once (same port,
// same data). Every message must end up in the sink or the DLQ; in
// at-least-once mode duplicates are allowed, and there are some (that is
// what tells the modes apart), and in exactly-once mode a read_committed
// consumer finds each message exactly once, in both executor modes.
func TestKafkaChaos(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("chaos test: 5 SIGKILLs of a child worker and a broker restart under 10,000 messages (a minute or two per mode); skipped with -short, runs in the full suite")
	}
	// The workers are the svc binary as it ships (`svc run`): the real
	// process, and not slowed down by the race detector of this test.
	svc := workertest.BuildSvc(t)
	for _, c := range []struct{ delivery, mode string }{
		{config.DeliveryAtLeastOnce, "spawn"},
		{config.DeliveryExactlyOnce, "spawn"},
		{config.DeliveryExactlyOnce, "persistent"},
	} {
		t.Run(c.delivery+"/"+c.mode, func(t *testing.T) {
			t.Parallel()
			kcRun(t, svc, c.delivery, c.mode)
		})
	}
}

func kcRun(t *testing.T, svc, delivery, mode string) {
	seed := time.Now().UnixNano()
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	t.Logf("seed %d", seed)

	port, dataDir := workertest.FreePort(t), t.TempDir()
	broker := []kfake.Opt{kfake.Ports(port), kfake.DataDir(dataDir)}
	c := ktCluster(t, 4, broker...)
	addrs := c.ListenAddrs()

	cfg := ktConfig(t, addrs, workertest.EchoScript(t))
	if mode == "persistent" {
		cfg.Executor.BinaryPath, cfg.Executor.Args, cfg.Executor.Mode = svc, []string{"exec-demo"}, "persistent"
	}
	// The sink keeps the input's h-id header: the sample executor's output
	// does not carry the message id.
	cfg.Sinks.Kafka[0].ForwardHeaders = true
	cfg.Sources.Kafka.Delivery = delivery
	if delivery == config.DeliveryExactlyOnce {
		cfg.Sources.Kafka.CommitInterval = config.Duration(100 * time.Millisecond)
	}
	cfg.Executor.PoolSize = 4
	cfg.Pipeline.MaxInFlight = 32
	// Static membership, as in production: a restarted worker takes its
	// partitions back at once instead of waiting for the session timeout.
	cfg.Sources.Kafka.StartupAlignEnabled = true
	cfg.Sources.Kafka.StartupAlignSeconds = 1
	cfg.Sources.Kafka.ClientConfig["session.timeout.ms"] = "3000"
	cfg.Sources.Kafka.ClientConfig["heartbeat.interval.ms"] = "300"
	// The broker restart lasts a moment: DLQ sends and deliveries wait it out.
	cfg.DLQ.SendTimeout = config.Duration(20 * time.Second)
	if delivery == config.DeliveryAtLeastOnce {
		cfg.Sinks.Kafka[0].ClientConfig = map[string]string{"metadata.max.age.ms": "500"}
	} else { // the sink produces through the consumer's client
		cfg.Sources.Kafka.ClientConfig["metadata.max.age.ms"] = "500"
	}
	cfg.Resolve()
	cfgPath := ktWriteConfig(t, cfg)
	logPath := ktChildLog(t)
	group := cfg.Sources.Kafka.Group
	fails := func(id int) bool { return id%50 == 7 }

	// The producer runs through kills and the broker restart; its client
	// retries until the broker is back.
	prod := ktClient(t, addrs)
	var produced atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() {
		for from := 0; from < kcMessages; from += 200 {
			var recs []*kgo.Record
			for i := from; i < from+200; i++ {
				recs = append(recs, ktMsg(i, fmt.Sprintf("k%d", i%13), fails(i)))
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*ktWait)
			err := prod.ProduceSync(ctx, recs...).FirstErr()
			cancel()
			if err != nil {
				t.Errorf("produce %d-%d: %v", from, from+199, err)
				return
			}
			produced.Add(200)
			time.Sleep(50 * time.Millisecond)
		}
	})
	t.Cleanup(wg.Wait)

	// Kill points: random amounts of sink output, spread over the stream;
	// the broker restarts between the second and third kill.
	var at []int64
	for range kcKills {
		at = append(at, int64(kcMessages/20+rng.IntN(kcMessages*3/4)))
	}
	slices.Sort(at)
	restartAt := at[1] + (at[2]-at[1])/2
	t.Logf("kills after %v sink records, broker restart after %d", at, restartAt)

	adm := ktAdmin(t, addrs)
	child := ktStartChild(t, exec.Command(svc, "run", "-config", cfgPath), logPath)
	restarted := false
	for i, n := range at {
		last, moved := int64(-1), time.Now()
		for {
			out := kcSinkCount(adm)
			if out != last {
				last, moved = out, time.Now()
			}
			if time.Since(moved) > 90*time.Second {
				t.Fatalf("no sink progress for 90 s at %d records, waiting for %d (kill %d)", out, n, i+1)
			}
			if !restarted && out >= restartAt {
				c.Close()
				time.Sleep(time.Second) // a real outage, however short
				c = kcRestart(t, broker)
				restarted = true
				t.Logf("broker restarted at %d sink records", out)
			}
			if out >= n {
				break
			}
			if child.ProcessState != nil {
				t.Fatalf("the worker exited on its own before kill %d", i+1)
			}
			time.Sleep(20 * time.Millisecond)
		}
		if err := child.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = child.Wait()
		t.Logf("kill %d at %d sink records", i+1, kcSinkCount(adm))
		child = ktStartChild(t, exec.Command(svc, "run", "-config", cfgPath), logPath)
	}
	wg.Wait()
	if produced.Load() != kcMessages {
		t.Fatalf("%d of %d messages produced", produced.Load(), kcMessages)
	}
	ktWaitCommitted(t, adm, group)
	if err := child.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := child.Wait(); err != nil {
		t.Errorf("last worker exited with %v after SIGTERM, want a clean exit", err)
	}

	if delivery == config.DeliveryExactlyOnce {
		eosCheckExactlyOnce(t, kcMessages, fails, ktReadCommitted(t, addrs, ktOut), ktReadCommitted(t, addrs, ktDLQ))
		return
	}
	out, dlq := eosIDs(ktReadAll(t, addrs, ktOut)), eosIDs(ktReadAll(t, addrs, ktDLQ))
	dups := ktCheckAllOut(t, ktIDs(0, kcMessages), out, dlq)
	for id := range kcMessages {
		if fails(id) && out[id] > 0 || !fails(id) && dlq[id] > 0 {
			t.Errorf("message %d (failing %v) is in the wrong topic: sink %d, DLQ %d", id, fails(id), out[id], dlq[id])
		}
	}
	if dups == 0 {
		t.Errorf("at-least-once: 0 duplicates over %d SIGKILLs and a broker restart; the run cannot tell the delivery modes apart", kcKills)
	}
}

// kcSinkCount is the number of records in the sink topic; 0 while the
// broker does not answer (it is being restarted).
func kcSinkCount(adm *kadm.Client) int64 {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	l, err := adm.ListEndOffsets(ctx, ktOut)
	if err != nil || l.Error() != nil {
		return 0
	}
	var n int64
	l.Each(func(o kadm.ListedOffset) { n += o.Offset })
	return n
}

// kcRestart starts the broker again on the same port with the same data.
func kcRestart(t *testing.T, opts []kfake.Opt) *kfake.Cluster {
	t.Helper()
	base := []kfake.Opt{kfake.NumBrokers(1), kfake.GroupMinSessionTimeout(500 * time.Millisecond)}
	c, err := kfake.NewCluster(append(base, opts...)...)
	if err != nil {
		t.Fatalf("restart the broker: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}
