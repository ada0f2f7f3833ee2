package kafka

import (
	"fmt"
	"net/http"
	"reflect"
	"testing"
	"time"

	"svc/worker/config"
	"svc/worker/model"
	"svc/worker/workertest"
	"svc/worker/workertest/wait"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestKafkaDLQUnconfigured: an HTTP worker with sinks and no DLQ (no Kafka
// source, no dlq.topic) drops failed messages, counts each in
// svc_dlq_unconfigured_drops_total and warns once.
func TestKafkaDLQUnconfigured(t *testing.T) {
	t.Parallel()
	c := ktCluster(t, 1)
	addrs := c.ListenAddrs()
	cfg := ktConfig(t, addrs, workertest.EchoScript(t))
	cfg.Sources.Kafka = config.Default().Sources.Kafka
	// Port 0: the default 8090 is taken when another package's test runs
	// a demo worker at the same time.
	cfg.Sources.HTTP.Enabled, cfg.Sources.HTTP.Host, cfg.Sources.HTTP.Port = true, "127.0.0.1", 0
	cfg.Sources.HTTP.SinksEnabled = true
	cfg.Sinks.Kafka[0].Brokers = addrs
	cfg.Sinks.Kafka[0].ClientConfig = map[string]string{"metadata.max.age.ms": "500"}
	w := ktStart(t, cfg)
	if w.Sinks == nil || w.Sinks.DLQEnabled() {
		t.Fatal("want a sink set without a DLQ producer")
	}

	for i := range 3 {
		resp, err := w.App.HandleHTTP(t.Context(), &model.HTTPRequest{ID: fmt.Sprint("r", i), Body: []byte(fmt.Sprintf("id=%d fail", i))})
		if err != nil || resp.Status != http.StatusBadGateway {
			t.Fatalf("HandleHTTP(failing body) = %+v, %v, want a 502 response", resp, err)
		}
		if got := w.Metric("svc_dlq_unconfigured_drops_total"); got != float64(i+1) {
			t.Errorf("svc_dlq_unconfigured_drops_total = %v after %d failures, want %d", got, i+1, i+1)
		}
	}
	if n := len(w.Logs.Named("dlq_unconfigured_drop")); n != 1 {
		t.Errorf("%d dlq_unconfigured_drop warnings after 3 drops, want exactly 1", n)
	}
	// An ok request still reaches the sink.
	if resp, err := w.App.HandleHTTP(t.Context(), &model.HTTPRequest{ID: "ok", Body: []byte("id=7")}); err != nil || resp.Status != http.StatusOK {
		t.Fatalf("HandleHTTP(ok body) = %+v, %v", resp, err)
	}
	out, _ := ktCollect(t, addrs, addrs)
	if !reflect.DeepEqual(out, map[int]int{7: 1}) {
		t.Errorf("sink ids = %v, want only the ok request 7", out)
	}
}

// ktDeadDLQ points the DLQ at a port nothing listens on, with a short send
// timeout, so every DLQ send fails.
func ktDeadDLQ(t testing.TB, cfg *config.Config, policy string) {
	cfg.DLQ.Brokers = []string{fmt.Sprintf("127.0.0.1:%d", workertest.FreePort(t))}
	cfg.DLQ.Topic = ktDLQ
	cfg.DLQ.OnSendFailure = policy
	cfg.DLQ.SendTimeout = config.Duration(time.Second)
}

// ktPartitioned makes n ok messages on partition p starting at id from,
// with a failing one at index failAt (-1: none).
func ktPartitioned(p int32, from, n, failAt int) []*kgo.Record {
	var out []*kgo.Record
	for i := range n {
		r := ktMsg(from+i, "", i == failAt)
		r.Partition = p
		out = append(out, r)
	}
	return out
}

// TestKafkaDLQStall: a DLQ send that fails under on_send_failure "stall"
// stops its partition (commit stays below the failed message, the
// partition is stall-paused and counted in svc_kafka_partitions_stalled),
// the other partitions keep flowing, a debug pause and resume does not
// touch the stall, and a restarted worker with a working DLQ picks the
// failed message up again.
func TestKafkaDLQStall(t *testing.T) {
	t.Parallel()
	c := ktCluster(t, 3)
	addrs := c.ListenAddrs()
	exe := workertest.EchoScript(t)
	cfg := ktPauseConfig(t, addrs, exe)
	ktDeadDLQ(t, cfg, "stall")
	group := cfg.Sources.Kafka.Group
	adm := ktAdmin(t, addrs)
	prod := ktManual(t, addrs)
	w := ktStart(t, cfg)
	w.WaitJoined()

	// Partition 0: ids 0-19, id 10 (offset 10) fails. Partitions 1 and 2 ok.
	recs := ktPartitioned(0, 0, 20, 10)
	recs = append(recs, ktPartitioned(1, 100, 20, -1)...)
	recs = append(recs, ktPartitioned(2, 200, 20, -1)...)
	ktProduce(t, prod, recs)

	wait.For(t, ktWait, "partition 0 stalls", func() (bool, string) {
		st := w.Metric("svc_kafka_partitions_stalled")
		return st == 1 && reflect.DeepEqual(w.StallPaused(), []int32{0}), fmt.Sprintf("stalled gauge %v, stall-paused %v", st, w.StallPaused())
	})
	wait.For(t, ktWait, "other partitions are committed to their end", func() (bool, string) {
		got := ktCommitted(t, adm, group)
		return got[1] == 20 && got[2] == 20, fmt.Sprintf("committed %v", got)
	})
	w.WaitSettled()
	if got := ktCommitted(t, adm, group); got[0] != 10 {
		t.Errorf("committed offset of the stalled partition = %d, want 10 (the failed message, not past it)", got[0])
	}
	if logs := w.Logs.Named("partition_stalled"); len(logs) != 1 || logs[0]["partition"] != 0.0 || logs[0]["offset"] != 10.0 {
		t.Errorf("partition_stalled logs = %v, want one for partition 0 offset 10", logs)
	}
	if n := len(w.Logs.Named("dlq_send_failed_stall")); n != 1 {
		t.Errorf("%d dlq_send_failed_stall logs, want 1", n)
	}

	// A debug pause and resume leaves the stall alone.
	if _, err := w.Src.Pause(60); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Src.Resume(); err != nil {
		t.Fatal(err)
	}
	if got := w.StallPaused(); !reflect.DeepEqual(got, []int32{0}) {
		t.Errorf("stall-paused partitions after a debug pause and resume = %v, want [0]", got)
	}
	ktProduce(t, prod, append(ktPartitioned(0, 20, 5, -1), ktPartitioned(1, 120, 5, -1)...))
	wait.For(t, ktWait, "partition 1 keeps flowing", func() (bool, string) {
		got := ktCommitted(t, adm, group)
		return got[1] == 25, fmt.Sprintf("committed %v", got)
	})
	w.WaitSettled()
	if got := ktCommitted(t, adm, group); got[0] != 10 {
		t.Errorf("committed offset of the stalled partition = %d after a debug resume, want 10", got[0])
	}
	out, _ := ktCollect(t, addrs, addrs)
	for id := 20; id < 25; id++ {
		if out[id] > 0 {
			t.Errorf("message %d produced to the stalled partition after the stall reached the sink", id)
		}
	}

	// Restart with a working DLQ: the stalled message is read again and
	// dead-lettered; nothing of partition 0 is lost.
	w.Stop()
	if got := w.Metric("svc_kafka_partitions_stalled"); got != 0 {
		t.Errorf("svc_kafka_partitions_stalled = %v after the partition was revoked, want 0", got)
	}
	cfg2 := ktConfig(t, addrs, exe)
	cfg2.Sources.Kafka.Group = group
	ktStart(t, cfg2)
	ktWaitCommitted(t, adm, group)
	out, dlq := ktCollect(t, addrs, addrs)
	ids := append(append(ktIDs(0, 25), ktIDs(100, 25)...), ktIDs(200, 20)...)
	ktCheckAllOut(t, ids, out, dlq)
	if dlq[10] == 0 {
		t.Error("the stalled message 10 is not in the DLQ after the restart")
	}
}

// TestKafkaDLQDrop: under on_send_failure "drop" a failed DLQ send is
// counted and logged and the commit moves past the message.
func TestKafkaDLQDrop(t *testing.T) {
	t.Parallel()
	c := ktCluster(t, 2)
	addrs := c.ListenAddrs()
	cfg := ktConfig(t, addrs, workertest.EchoScript(t))
	ktDeadDLQ(t, cfg, "drop")
	group := cfg.Sources.Kafka.Group
	adm := ktAdmin(t, addrs)
	w := ktStart(t, cfg)
	w.WaitJoined()
	recs := append(ktPartitioned(0, 0, 10, 4), ktPartitioned(1, 100, 10, -1)...)
	ktProduce(t, ktManual(t, addrs), recs)
	ktWaitCommitted(t, adm, group)
	if got := w.Metric("svc_dlq_records_total", "outcome", "failed"); got != 1 {
		t.Errorf("svc_dlq_records_total{outcome=failed} = %v, want 1", got)
	}
	if logs := w.Logs.Named("dlq_send_failed_drop"); len(logs) != 1 || logs[0]["partition"] != 0.0 || logs[0]["offset"] != 4.0 {
		t.Errorf("dlq_send_failed_drop logs = %v, want one naming partition 0 offset 4", logs)
	}
	if got := w.Metric("svc_kafka_partitions_stalled"); got != 0 {
		t.Errorf("svc_kafka_partitions_stalled = %v under the drop policy, want 0", got)
	}
	out, _ := ktCollect(t, addrs, addrs)
	for _, id := range append(ktIDs(0, 10), ktIDs(100, 10)...) {
		if id != 4 && out[id] == 0 {
			t.Errorf("ok message %d is not in the sink", id)
		}
	}
}

// TestKafkaDLQSendTimeoutWhenBrokerHangs: the DLQ broker accepts the
// connection but never answers a produce. dlq.send_timeout still bounds
// the send: under "drop" the failure is counted and the commit moves past
// the message; under "stall" the partition stalls.
func TestKafkaDLQSendTimeoutWhenBrokerHangs(t *testing.T) {
	t.Parallel()
	for _, policy := range []string{"drop", "stall"} {
		t.Run(policy, func(t *testing.T) {
			// Each takes 5 s more at shutdown: the DLQ producer's last
			// flush waits that long for the record the hung broker holds.
			t.Parallel()
			c := ktCluster(t, 1)
			addrs := c.ListenAddrs()
			hung := ktCluster(t, 1)
			hung.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
				hung.KeepControl()
				return nil, nil, true // swallow: never answer
			})
			cfg := ktConfig(t, addrs, workertest.EchoScript(t))
			cfg.DLQ.Topic = ktDLQ
			cfg.DLQ.Brokers = hung.ListenAddrs()
			cfg.DLQ.OnSendFailure = policy
			cfg.DLQ.SendTimeout = config.Duration(time.Second)
			group := cfg.Sources.Kafka.Group
			adm := ktAdmin(t, addrs)
			w := ktStart(t, cfg)
			w.WaitJoined()
			ktProduce(t, ktManual(t, addrs), ktPartitioned(0, 0, 6, 2))
			if policy == "drop" {
				ktWaitCommitted(t, adm, group)
			} else {
				wait.For(t, ktWait, "the partition stalls", func() (bool, string) {
					return w.Metric("svc_kafka_partitions_stalled") == 1, fmt.Sprint("stall-paused ", w.StallPaused())
				})
				w.WaitSettled()
				if got := ktCommitted(t, adm, group); got[0] != 2 {
					t.Errorf("committed %v, want partition 0 at 2 (the failed message)", got)
				}
			}
			if got := w.Metric("svc_dlq_records_total", "outcome", "failed"); got != 1 {
				t.Errorf("svc_dlq_records_total{outcome=failed} = %v, want 1", got)
			}
		})
	}
}
