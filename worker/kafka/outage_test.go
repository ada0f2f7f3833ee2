package kafka

import (
	"fmt"
	"testing"
	"time"

	"svc/worker/config"
	"svc/worker/sink"
	"svc/worker/workertest"
	"svc/worker/workertest/wait"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestKafkaSinkOutage stops the sink's cluster mid-stream: the breaker
// opens, the executors carry on until 4 × pipeline.max_in_flight messages
// wait for their deliveries and no further message starts, waiting ones
// stay at their cap, backpressure holds intake, the commit stays where the
// last delivered message left it; once the cluster is back (same port,
// same data) the breaker closes and every message reaches the sink.
func TestKafkaSinkOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("a whole sink outage and recovery: runs without -short")
	}
	t.Parallel()
	c := ktCluster(t, 4)
	addrs := c.ListenAddrs()
	port, dataDir := workertest.FreePort(t), t.TempDir()
	sinkOpts := []kfake.Opt{kfake.NumBrokers(1), kfake.Ports(port), kfake.DataDir(dataDir)}
	sc, err := kfake.NewCluster(append(sinkOpts, kfake.SeedTopics(4, ktOut))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sc.Close)
	sinkAddrs := sc.ListenAddrs()

	const maxIn = 16
	cfg := ktConfig(t, addrs, workertest.EchoScript(t))
	cfg.Pipeline.MaxInFlight = maxIn
	cfg.Sources.Kafka.MaxPollRecords = maxIn // waiting caps: 32 per partition, 96 in all
	cfg.Sinks.Kafka[0].Brokers = sinkAddrs
	cfg.Sinks.Kafka[0].ClientConfig = map[string]string{"metadata.max.age.ms": "500"}
	cfg.Sinks.Kafka[0].DeliveryTimeout = config.Duration(time.Second)
	cfg.Sinks.Kafka[0].Breaker = config.Breaker{FailureThreshold: 3, OpenTimeout: config.Duration(time.Second)}
	w := ktStart(t, cfg)
	group := cfg.Sources.Kafka.Group
	adm := ktAdmin(t, addrs)
	prod := ktClient(t, addrs)

	var batch []*kgo.Record
	for i := range 200 {
		batch = append(batch, ktMsg(i, fmt.Sprintf("k%d", i%7), false))
	}
	ktProduce(t, prod, batch)
	ktWaitCommitted(t, adm, group)
	before := ktCommitted(t, adm, group)
	polledBefore := w.Metric("svc_kafka_records_polled_total")

	sc.Close()
	batch = batch[:0]
	for i := 200; i < 500; i++ { // unkeyed, spread: every partition fills its waiting cap
		r := ktMsg(i, "", false)
		r.Partition = int32(i % 4)
		batch = append(batch, r)
	}
	ktProduce(t, ktManual(t, addrs), batch)

	wait.For(t, ktWait, "breaker opens", func() (bool, string) {
		st := w.Sinks.BreakerStates()["out"]
		return st != sink.Closed && w.Metric("svc_sink_breaker_transitions_total", "sink", "out", "to", "open") >= 1,
			fmt.Sprintf("state %s", st)
	})
	if got := w.Metric("svc_sink_breaker_state", "sink", "out"); got == float64(sink.Closed) {
		t.Errorf("svc_sink_breaker_state{sink=out} = %v while the sink is down, want open (1) or half-open (2)", got)
	}
	wait.For(t, ktWait, "backpressure engages", func() (bool, string) {
		bp := w.Metric("svc_backpressure_active")
		return bp == 1 && w.IntakePaused(), fmt.Sprintf("svc_backpressure_active %v, %d in flight, %d waiting", bp, w.InFlight(), w.Waiting())
	})
	// The executors run until the deliveries reach their cap: a message
	// whose tasks ended no longer holds a task slot. The messages running
	// when the cap is reached still end and deliver.
	const maxDelivering = 4 * maxIn
	wait.For(t, ktWait, "deliveries fill their cap", func() (bool, string) {
		return w.Delivering() >= maxDelivering && w.Executing() == 0,
			fmt.Sprintf("%d delivering, %d running their tasks", w.Delivering(), w.Executing())
	})
	// Observed over a while: intake stays capped and the commit frozen.
	totalWait := w.Src.lim.totalWait
	polledHeld := w.Metric("svc_kafka_records_polled_total")
	for range 10 {
		if ex, dl, waiting := w.Executing(), w.Delivering(), w.Waiting(); ex > 0 || dl > maxDelivering+maxIn || waiting > totalWait {
			t.Errorf("%d running their tasks, %d delivering and %d waiting during the outage, want none running (no start past %d deliveries), at most %d delivering and %d waiting",
				ex, dl, waiting, maxDelivering, maxDelivering+maxIn, totalWait)
		}
		if got, want := w.Metric("svc_kafka_messages_in_flight"), float64(w.InFlight()); got != want {
			t.Errorf("svc_kafka_messages_in_flight = %v while %v messages run, want them equal", got, want)
		}
		if got, want := w.Metric("svc_kafka_messages_delivering"), float64(w.Delivering()); got != want {
			t.Errorf("svc_kafka_messages_delivering = %v while %v messages deliver, want them equal", got, want)
		}
		if got := ktCommitted(t, adm, group); fmt.Sprint(got) != fmt.Sprint(before) {
			t.Fatalf("committed offsets moved to %v during the sink outage (before it: %v): undelivered messages were committed", got, before)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if got := w.Metric("svc_kafka_records_polled_total"); got != polledHeld {
		t.Errorf("%v records polled while backpressure held intake, want none", got-polledHeld)
	}
	if got := w.Metric("svc_kafka_records_polled_total") - polledBefore; got > float64(maxIn+maxDelivering+totalWait) {
		t.Errorf("%v records polled during the outage, want at most max_in_flight + the delivering and waiting caps = %d", got, maxIn+maxDelivering+totalWait)
	}

	sc2, err := kfake.NewCluster(sinkOpts...)
	if err != nil {
		t.Fatalf("restart the sink cluster on port %d: %v", port, err)
	}
	t.Cleanup(sc2.Close)
	wait.For(t, ktWait, "breaker closes after the sink returns", func() (bool, string) {
		st := w.Sinks.BreakerStates()["out"]
		return st == sink.Closed, fmt.Sprintf("state %s", st)
	})
	ktWaitCommitted(t, adm, group)
	out, dlq := ktCollect(t, addrs, sinkAddrs)
	ktCheckAllOut(t, ktIDs(0, 500), out, dlq)
	if len(dlq) > 0 {
		t.Errorf("%d messages went to the DLQ during a sink outage, want none", len(dlq))
	}
	if got := w.Metric("svc_backpressure_active"); got != 0 {
		t.Errorf("svc_backpressure_active = %v after recovery, want 0", got)
	}
	if got := w.Metric("svc_sink_breaker_state", "sink", "out"); got != float64(sink.Closed) {
		t.Errorf("svc_sink_breaker_state{sink=out} = %v after recovery, want 0", got)
	}
}

// TestKafkaShutdownWithStuckDelivery stops a worker whose sink is
// unreachable: intake stops and Run returns once the shutdown timeout has
// passed, without waiting for the (long) revoke timeout as well; nothing
// undelivered is committed and a later worker delivers it.
func TestKafkaShutdownWithStuckDelivery(t *testing.T) {
	t.Parallel()
	c := ktCluster(t, 2)
	addrs := c.ListenAddrs()
	cfg := ktConfig(t, addrs, workertest.EchoScript(t))
	cfg.Sinks.Kafka[0].Brokers = []string{fmt.Sprintf("127.0.0.1:%d", workertest.FreePort(t))}
	cfg.Sinks.Kafka[0].DeliveryTimeout = config.Duration(500 * time.Millisecond)
	cfg.Worker.ShutdownTimeout = config.Duration(time.Second)
	cfg.Sources.Kafka.RevokeTimeout = config.Duration(time.Hour)
	group := cfg.Sources.Kafka.Group
	w := ktStart(t, cfg)
	w.WaitJoined()
	adm := ktAdmin(t, addrs)
	var recs []*kgo.Record
	for i := range 3 {
		recs = append(recs, ktMsg(i, "", false))
	}
	ktProduce(t, ktClient(t, addrs), recs)
	wait.For(t, ktWait, "deliveries are stuck", func() (bool, string) {
		return w.InFlight() == 3, fmt.Sprintf("%d in flight", w.InFlight())
	})

	w.once.Do(func() {
		w.stop()
		select {
		case err := <-w.done:
			if err != nil {
				t.Errorf("Run = %v", err)
			}
		case <-time.After(60 * time.Second):
			t.Fatal("Run did not return 60s after intake stopped with a 1s shutdown timeout: the shutdown waits for sources.kafka.revoke_timeout too")
		}
	})
	if got := ktCommitted(t, adm, group); ktSum(got) != 0 {
		t.Errorf("committed offsets %v after a shutdown with nothing delivered, want none", got)
	}
	if len(w.Logs.Named("drain_deadline_reached")) != 1 {
		t.Error("no drain_deadline_reached warning: the deliveries were stuck, the drain cannot have finished")
	}

	cfg2 := ktConfig(t, addrs, workertest.EchoScript(t))
	cfg2.Sources.Kafka.Group = group
	ktStart(t, cfg2)
	ktWaitCommitted(t, adm, group)
	out, dlq := ktCollect(t, addrs, addrs)
	ktCheckAllOut(t, ktIDs(0, 3), out, dlq)
}
