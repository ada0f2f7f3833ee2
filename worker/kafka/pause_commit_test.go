package kafka

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"svc/worker/config"
	"svc/worker/workertest"
	"svc/worker/workertest/wait"

	"github.com/twmb/franz-go/pkg/kadm"
)

// LocalCommit is the commit point the worker would send for each
// partition (finished work, committed or not).
func (w *ktWorker) LocalCommit() map[int32]int64 {
	s := w.Src
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[int32]int64{}
	for p, st := range s.parts {
		if st.commit.Offset >= 0 {
			out[p] = st.commit.Offset
		}
	}
	return out
}

// ktFinishDuringPause starts n messages on partition p behind a closed
// gate, pauses for 10 minutes, opens the gate and waits until the work
// finished inside the pause; it returns the group's commit from before.
func ktFinishDuringPause(t *testing.T, w *ktWorker, gate *workertest.Gate, adm *kadm.Client, group string, p int32, from, n int) map[int32]int64 {
	t.Helper()
	ktProduce(t, ktManual(t, w.App.Config().Sources.Kafka.Brokers), ktPartitioned(p, from, n, -1))
	// All n polled before the pause (the producer may send them in more
	// than one batch): what the pause holds back is then only their commit.
	wait.For(t, ktWait, "the messages polled, running behind the gate", func() (bool, string) {
		return w.InFlight() > 0 && w.InFlight()+w.Waiting() >= n, fmt.Sprintf("%d in flight, %d waiting", w.InFlight(), w.Waiting())
	})
	before := ktCommitted(t, adm, group)
	if _, err := w.Src.Pause(600); err != nil {
		t.Fatalf("ConsumePause(600) = %v", err)
	}
	gate.Open(t)
	wait.For(t, ktWait, "the running messages finish during the pause", func() (bool, string) {
		return w.InFlight() == 0 && w.Waiting() == 0, fmt.Sprintf("%d in flight, %d waiting", w.InFlight(), w.Waiting())
	})
	if got := w.LocalCommit(); reflect.DeepEqual(got, before) {
		t.Fatalf("no message finished during the pause (commit point %v): the test proves nothing", got)
	}
	return before
}

// TestKafkaNoCommitWhilePaused: work that was running when a consume
// pause began finishes during it, and nothing is committed until the
// pause ends: the commit follows at once on resume and on the deadline,
// and a shutdown during a pause commits too. In exactly-once mode the
// finished work's results wait with their offsets: a read_committed
// reader of the sink sees none of them during the pause and all of them,
// once each, after it.
func TestKafkaNoCommitWhilePaused(t *testing.T) {
	t.Parallel()
	for _, delivery := range []string{config.DeliveryAtLeastOnce, config.DeliveryExactlyOnce} {
		t.Run(delivery, func(t *testing.T) {
			t.Parallel()
			ktNoCommitWhilePaused(t, delivery)
		})
	}
}

func ktNoCommitWhilePaused(t *testing.T, delivery string) {
	eos := delivery == config.DeliveryExactlyOnce
	t.Run("commit interval passes, resume commits", func(t *testing.T) {
		t.Parallel()
		c := ktCluster(t, 2)
		gate := workertest.NewGate(t)
		cfg := ktPauseConfig(t, c.ListenAddrs(), gate.Path)
		cfg.Sources.Kafka.Delivery = delivery
		cfg.Sources.Kafka.CommitInterval = config.Duration(50 * time.Millisecond)
		group := cfg.Sources.Kafka.Group
		adm := ktAdmin(t, c.ListenAddrs())
		w := ktStart(t, cfg)
		w.WaitJoined()
		before := ktFinishDuringPause(t, w, gate, adm, group, 0, 0, 6)
		for range 8 { // 40 commit intervals
			time.Sleep(250 * time.Millisecond)
			if got := ktCommitted(t, adm, group); !reflect.DeepEqual(got, before) {
				t.Fatalf("committed offsets moved from %v to %v during the consume pause", before, got)
			}
		}
		if n := len(ktReadCommitted(t, c.ListenAddrs(), ktOut)); eos && n != 0 {
			t.Fatalf("a read_committed reader sees %d results during the consume pause, want 0: they wait with their offsets", n)
		}
		want := w.LocalCommit()
		if _, err := w.Src.Resume(); err != nil {
			t.Fatal(err)
		}
		wait.For(t, ktWait, "the resume commits what finished", func() (bool, string) {
			got := ktCommitted(t, adm, group)
			return reflect.DeepEqual(got, want), fmt.Sprintf("committed %v, want %v", got, want)
		})
		if eos {
			eosCheckExactlyOnce(t, 6, func(int) bool { return false }, ktReadCommitted(t, c.ListenAddrs(), ktOut), ktReadCommitted(t, c.ListenAddrs(), ktDLQ))
		}
	})

	t.Run("deadline commits, shutdown during a pause commits", func(t *testing.T) {
		t.Parallel()
		c := ktCluster(t, 2)
		gate := workertest.NewGate(t)
		cfg := ktPauseConfig(t, c.ListenAddrs(), gate.Path)
		cfg.Sources.Kafka.Delivery = delivery
		// No interval commit during the test: only the pause's end and
		// the shutdown commit.
		cfg.Sources.Kafka.CommitInterval = config.Duration(time.Hour)
		group := cfg.Sources.Kafka.Group
		adm := ktAdmin(t, c.ListenAddrs())
		w := ktStart(t, cfg)
		w.WaitJoined()

		ktFinishDuringPause(t, w, gate, adm, group, 0, 0, 6)
		want := w.LocalCommit()
		if _, err := w.Src.Pause(1); err != nil { // the deadline moves to 1 s from now
			t.Fatal(err)
		}
		wait.For(t, ktWait, "the deadline ends the pause and commits what finished", func() (bool, string) {
			got := ktCommitted(t, adm, group)
			return reflect.DeepEqual(got, want), fmt.Sprintf("committed %v, want %v, pause %+v", got, want, w.Src.PauseState())
		})

		gate.Close(t)
		before := ktFinishDuringPause(t, w, gate, adm, group, 1, 10, 6)
		want = w.LocalCommit()
		if got := ktCommitted(t, adm, group); !reflect.DeepEqual(got, before) {
			t.Fatalf("committed offsets moved from %v to %v during the consume pause", before, got)
		}
		w.Stop()
		if got := ktCommitted(t, adm, group); !reflect.DeepEqual(got, want) {
			t.Errorf("committed %v after a shutdown during a pause, want what finished: %v", got, want)
		}
	})
}
