package fleet

import (
	"sync/atomic"
	"testing"
	"time"

	"svc/worker/workertest/wait"
)

func ptr(v int64) *int64 { return &v }

// A worker's load goes onto its card at each heartbeat and into every
// reader's workers list; a stopped worker's card carries none; the list
// says how old each heartbeat is.
func TestLoadTravelsOnTheCard(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	var calls atomic.Int64
	a := run(t, root, "a", func(c *Config) {
		c.Load = func() *Load {
			n := calls.Add(1)
			return &Load{Partitions: ptr(3), MessagesInFlight: ptr(2), TasksRunning: 1, PoolSize: 4, TasksPerSecond: 2.5,
				Lag: ptr(n), Intake: IntakeBackpressure, StalledPartitions: 1, Breakers: map[string]string{"out": BreakerOpen}}
		}
	})
	b := run(t, root, "b")
	waitStates(t, b.Registry, "a=running b=running*")
	wait.For(t, wait.Long, "b lists a's load, refreshed at a's heartbeats", func() (bool, string) {
		for _, w := range b.Workers() {
			if w.Name == "a" && w.Load != nil && *w.Load.Lag >= 3 {
				l := w.Load
				ok := *l.Partitions == 3 && *l.MessagesInFlight == 2 && l.TasksRunning == 1 && l.PoolSize == 4 && l.TasksPerSecond == 2.5 &&
					l.Intake == IntakeBackpressure && l.StalledPartitions == 1 && l.Breakers["out"] == BreakerOpen &&
					w.HeartbeatAgeMS != nil && *w.HeartbeatAgeMS >= 0 && *w.HeartbeatAgeMS < 10_000
				if !ok {
					t.Fatalf("a as b lists it = %+v, load %+v", w, *l)
				}
				return true, ""
			}
		}
		return false, states(b.Workers())
	})
	for _, w := range a.Workers() {
		if w.Self && (w.Load == nil || w.HeartbeatAgeMS == nil) {
			t.Errorf("a lists itself without its load or heartbeat age: %+v", w)
		}
	}
	a.stop()
	waitStates(t, b.Registry, "a=stopped b=running*")
	if c := readCard(t, root, "a"); c.Load != nil {
		t.Errorf("stopped card carries a load: %+v", *c.Load)
	}
	for _, w := range b.Workers() {
		if w.Name == "a" && w.Load != nil {
			t.Errorf("stopped worker listed with a load: %+v", *w.Load)
		}
	}
}

// A load on a card is believed only when plausible: whoever writes the
// folder may write anything there, and the UI shows it. An implausible
// load is dropped, the card still listed.
func TestImplausibleLoadDropped(t *testing.T) {
	t.Parallel()
	good := func() map[string]any {
		return map[string]any{"partitions": 2, "messages_in_flight": 0, "tasks_running": 0, "pool_size": 2, "tasks_per_second": 0.5,
			"lag": 7, "intake": "flowing", "stalled_partitions": 0, "breakers": map[string]any{"out": "closed"}}
	}
	many := map[string]any{}
	for i := range MaxBreakers + 1 {
		many[string(rune('a'+i%26))+string(rune('a'+i/26))] = "closed"
	}
	cases := []struct {
		name string
		edit func(map[string]any)
		kept bool
	}{
		{"plausible", func(map[string]any) {}, true},
		{"HTTP only, no Kafka fields", func(l map[string]any) {
			l["intake"], l["partitions"], l["lag"], l["messages_in_flight"] = "http_only", nil, nil, nil
		}, true},
		{"negative lag", func(l map[string]any) { l["lag"] = -1 }, false},
		{"unknown intake", func(l map[string]any) { l["intake"] = "<b>on fire</b>" }, false},
		{"unknown breaker state", func(l map[string]any) { l["breakers"] = map[string]any{"out": "melted"} }, false},
		{"sink name with markup", func(l map[string]any) { l["breakers"] = map[string]any{"<img src=x>": "open"} }, false},
		{"too many sinks", func(l map[string]any) { l["breakers"] = many }, false},
		{"negative rate", func(l map[string]any) { l["tasks_per_second"] = -3 }, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			load := good()
			c.edit(load)
			now := time.Now().UnixMilli()
			card := forged("x", "inst-x", now, now)
			card["load"] = load
			forge(t, root, card)
			r := run(t, root, "reader")
			waitStates(t, r.Registry, "reader=running* x=running")
			for _, w := range r.Workers() {
				if w.Name == "x" && (w.Load != nil) != c.kept {
					t.Errorf("load %v listed = %v, want kept %v", load, w.Load, c.kept)
				}
			}
		})
	}
}
