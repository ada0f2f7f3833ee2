package fleet

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"svc/worker/workertest/wait"
)

// A card naming a running worker that this worker did not write never
// evicts it, whatever times the forger writes: the worker writes its own
// card over it and reports the conflict once.
func TestForgedCardNeverEvictsARunningWorker(t *testing.T) {
	t.Parallel()
	now := time.Now()
	cases := []struct {
		name                 string
		startedAt, heartbeat int64
		state                string
	}{
		{"heartbeat a day ahead", 1, now.Add(24 * time.Hour).UnixMilli(), StateRunning},
		{"started first, heartbeat now", 1, now.UnixMilli(), StateRunning},
		{"start a day ahead", now.Add(24 * time.Hour).UnixMilli(), now.Add(24 * time.Hour).UnixMilli(), StateRunning},
		{"stopped", 1, now.UnixMilli(), StateStopped},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			a, b := run(t, root, "a"), run(t, root, "b")
			waitStates(t, b.Registry, "a=running b=running*")
			mine := readCard(t, root, "a").Instance

			card := forged("a", "forged", c.startedAt, c.heartbeat)
			card["state"] = c.state
			forge(t, root, card)
			// a reads its card, then writes its own: a forge landing between
			// the two is replaced unseen. Forge again until a has seen one.
			wait.For(t, wait.Long, "a to see the forged card and write its own over it", func() (bool, string) {
				got := readCard(t, root, "a")
				seen := len(a.logs.Named("fleet_name_conflict")) > 0
				if got.Instance == mine && !seen {
					forge(t, root, card)
				}
				return got.Instance == mine && seen, fmt.Sprintf("card instance %s, conflict logged %v", got.Instance, seen)
			})
			time.Sleep(500 * time.Millisecond) // five heartbeats of a
			if got := readCard(t, root, "a"); got.Instance != mine {
				t.Fatalf("a lost its card again: %+v", got)
			}
			// Heartbeats are 100 ms apart here: on a loaded machine one can
			// come late enough for b to call a unreachable for a moment, so
			// b's listing is awaited rather than read once.
			wait.For(t, wait.Long, "b to list a running at its own URL", func() (bool, string) {
				ws := b.Workers()
				return states(ws) == "a=running b=running*" && ws[0].URL == "http://a:8080", fmt.Sprintf("b lists %+v", ws)
			})
			logs := a.logs.Named("fleet_name_conflict")
			if len(logs) != 1 || logs[0]["other_instance"] != "forged" || logs[0]["action"] != "overwritten" || logs[0]["level"] != "ERROR" {
				t.Errorf("conflict logs = %v, want one naming the forged instance", logs)
			}
		})
	}
}

// A worker starting beside a card of its own name stamped in the future
// does not yield to it: such a card is never trusted as live.
func TestStartingWorkerIgnoresACardFromTheFuture(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	forge(t, root, forged("a", "forged", 1, time.Now().Add(23*time.Hour).UnixMilli()))
	a := run(t, root, "a")
	wait.For(t, wait.Long, "a to write its card", func() (bool, string) {
		got := readCard(t, root, "a")
		return got.Instance == a.instance, "card instance " + got.Instance
	})
	if logs := a.logs.Named("fleet_name_conflict"); len(logs) != 1 || logs[0]["action"] != "overwritten" {
		t.Errorf("conflict logs = %v, want one: overwritten", logs)
	}
}

// Readers neither list nor pull a card whose heartbeat or start is more
// than MaxClockSkew ahead of their clock, and report each once; a card
// within the skew is listed.
func TestCardsFromTheFutureAreNotListed(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	now := time.Now()
	forge(t, root, forged("ghost", "g", 1, now.Add(time.Hour).UnixMilli()))
	forge(t, root, forged("early", "e", now.Add(time.Hour).UnixMilli(), now.UnixMilli()))
	forge(t, root, forged("near", "n", 1, now.Add(MaxClockSkew/2).UnixMilli()))
	a := run(t, root, "a")
	waitStates(t, a.Registry, "a=running* near=running")
	for range 3 {
		a.Workers()
		if ps := a.Peers(); len(ps) != 1 || ps[0].Name != "near" {
			t.Errorf("Peers = %+v, want only near", ps)
		}
	}
	logs := a.logs.Named("fleet_card_clock_ahead")
	var named []string
	for _, l := range logs {
		named = append(named, fmt.Sprint(l["card"]))
	}
	if got := strings.Join(named, " "); len(logs) != 2 || !strings.Contains(got, "ghost") || !strings.Contains(got, "early") || logs[0]["level"] != "WARN" {
		t.Errorf("clock-ahead logs = %v, want one each for ghost and early", logs)
	}
}

// deadPID is the pid of a process of this host that has exited and been
// reaped.
func deadPID(t *testing.T) int {
	t.Helper()
	c := exec.Command("true")
	if err := c.Run(); err != nil {
		t.Skipf("no true(1): %v", err)
	}
	return c.Process.Pid
}

// A worker restarted after SIGKILL finds the card of its previous
// instance still live; when that instance provably ran on this host and is
// gone (its pid is dead, or is this process's own pid) it takes the card
// over at once, logging fleet_card_taken_over, not a conflict. Anything it
// cannot prove still makes it yield.
func TestRestartTakesOverItsDeadInstanceAtOnce(t *testing.T) {
	t.Parallel()
	host, _ := os.Hostname()
	boot, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	bootID := strings.TrimSpace(string(boot))
	cases := []struct {
		name     string
		host     string
		pid      int
		takeOver bool
	}{
		{"pid dead on this host", host, deadPID(t), true},
		{"pid is this process (a container restart)", host, os.Getpid(), true},
		{"pid alive on this host", host, os.Getppid(), false},
		{"pid dead on another host", "elsewhere", deadPID(t), false},
		{"card without a pid", host, 0, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			card := forged("a", "before-kill", time.Now().Add(-time.Minute).UnixMilli(), time.Now().Add(MaxClockSkew/2).UnixMilli())
			card["url"] = "http://a:8080"
			if c.pid != 0 {
				card["host"], card["boot_id"], card["pid"] = c.host, bootID, c.pid
			}
			forge(t, root, card)
			a := run(t, root, "a", func(cfg *Config) { cfg.Heartbeat = time.Second })
			if !c.takeOver {
				wait.For(t, wait.Long, "the conflict log", func() (bool, string) { return len(a.logs.Named("fleet_name_conflict")) == 1, a.logs.String() })
				if got := readCard(t, root, "a"); got.Instance != "before-kill" {
					t.Errorf("a took over a card it cannot prove dead: %+v", got)
				}
				return
			}
			wait.For(t, wait.Long, "a to take its card over", func() (bool, string) {
				got := readCard(t, root, "a")
				return got.Instance == a.instance, "card instance " + got.Instance
			})
			logs := a.logs.Named("fleet_card_taken_over")
			if len(logs) != 1 || logs[0]["reason"] != "previous_instance_dead" || logs[0]["level"] != "INFO" {
				t.Errorf("take-over logs = %v", logs)
			}
			if n := len(a.logs.Named("fleet_name_conflict")); n != 0 {
				t.Errorf("a restart logged %d name conflicts:\n%s", n, a.logs.String())
			}
		})
	}
}
