package main

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"svc/worker/workertest/wait"
)

// nfRuns is how many times each scenario runs: 2 (CI), or 10 in the
// long mode (SVC_NETFAULT_LONG=1) so an intermittent stall shows.
func nfRuns() int {
	if os.Getenv("SVC_NETFAULT_LONG") != "" {
		return 10
	}
	return 2
}

// nfRepeat runs fn nfRuns() times as subtests run1, run2, ... In the long
// mode the runs follow each other and stop at the first failure; in CI,
// with concurrent set, the two runs go at once, each in its own lab (the
// partition scenarios spend most of their time waiting out the cut, so
// the pair takes about the wall time of one run; the load of two labs at
// once is part of what they must survive).
func nfRepeat(t *testing.T, concurrent bool, fn func(t *testing.T)) {
	t.Helper()
	n := nfRuns()
	if !concurrent || n > 2 {
		for run := 1; run <= n; run++ {
			if !t.Run(fmt.Sprintf("run%d", run), fn) {
				return
			}
		}
		return
	}
	var wg sync.WaitGroup
	for run := 1; run <= n; run++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t.Run(fmt.Sprintf("run%d", run), fn)
		}()
	}
	wg.Wait()
}

// Smoke: three worker hosts consume the backlog from the broker host over
// the lab network and deliver every message; the client host reads them
// all.
func TestNetfaultSmokeThreeHosts(t *testing.T) {
	t.Parallel()
	l := newLab(t, 3)
	l.startBroker()
	var ws []*nfWorker
	for i := 1; i <= 3; i++ {
		ws = append(ws, l.startWorker(l.host(fmt.Sprintf("w%d", i)), nfWorkerOpts{delivery: "at_least_once", session: nfSession}))
	}
	// Every worker joined the group (each ready only once it has), then
	// the backlog arrives.
	for _, w := range ws {
		w.waitReady(t, wait.Long)
	}
	const n = 600
	l.produceBacklog(n)
	sink := l.readSink()
	wait.For(t, 2*time.Minute, "every message delivered", func() (bool, string) {
		for _, w := range ws {
			w.check(t)
		}
		d, missing, dups := sink.tally(n)
		return missing == 0, fmt.Sprintf("%d of %d delivered, %d duplicates", d, n, dups)
	})
	for _, w := range ws {
		if got := sink.deliveredBy(w.name); got == 0 {
			t.Errorf("%s delivered no result (assigned: %v)", w.host.name, w.events("partitions_assigned"))
		}
	}
}

// nfScenario is one partition between a worker and the broker.
type nfScenario struct {
	name     string
	delivery string
	cut      time.Duration // how long the partition lasts
	n        int           // messages in the backlog
	session  time.Duration // the group session timeout; 0: the worker's default (45 s)
	// inTxn cuts while the transaction coordinator holds one of the
	// worker's transactions open (exactly-once), so a cut past the
	// transaction timeout (40 s) makes the coordinator abort it on its
	// own, bumping the producer epoch.
	inTxn bool
	// dir is which way packets are dropped (both by default; inbound: the
	// worker's requests reach the broker, its answers never come back).
	dir direction
	// persistent: the executor in mode persistent (echo-go).
	persistent bool
	// workers in the group (default 1); the first is cut, the others
	// must take its partitions over and keep delivering meanwhile.
	workers int
	// linkDown takes the worker's link down instead of dropping packets:
	// its sends fail at once (no route) rather than hang.
	linkDown bool
	// rebalance cuts the first worker while its group rebalances:
	// "join" when a second worker (on w2) joins, "leave" when the second,
	// which shared the backlog, stops and leaves. The cut starts as the
	// broker receives that JoinGroup or LeaveGroup. "rejoin": a second
	// worker joins and the cut starts as the broker receives the first
	// worker's own JoinGroup (its rejoin), held until the cut is in place,
	// so the worker waits for its join's answer with nothing else in
	// flight.
	rebalance string
	// longOnly scenarios run only in the long mode (SVC_NETFAULT_LONG=1),
	// to keep the CI run within its budget.
	longOnly bool
}

// readyBound is how long after the heal the worker must be ready again
// and have delivered everything: the session timeout (the group may have
// expelled it) plus 60 s to rejoin and drain the rest of the backlog on
// a loaded 2-core machine.
func (sc nfScenario) readyBound() time.Duration {
	if sc.cut >= time.Minute {
		// Past the request and dial timeouts' backoffs (up to 30 s
		// between session restarts, exactly-once).
		return nfSession + 90*time.Second
	}
	if sc.session == 0 {
		return 45*time.Second + 60*time.Second
	}
	return sc.session + 60*time.Second
}

// The worker alone on its host is cut from the broker (every packet both
// ways dropped) in the middle of its backlog, with tasks running and
// results waiting to be delivered, then the network heals. Every message
// must be delivered (0 lost), exactly-once without a duplicate for a
// read_committed reader, /readyz must say why it is not ready while the
// broker is unreachable, and be ready again within readyBound.
func TestNetfaultPartitionWorkerFromBroker(t *testing.T) {
	needLab(t)
	var scenarios []nfScenario
	for _, cut := range []time.Duration{5 * time.Second, 45 * time.Second} {
		for _, d := range []string{"at_least_once", "exactly_once"} {
			scenarios = append(scenarios, nfScenario{name: fmt.Sprintf("%s/%s", cut, d), delivery: d, cut: cut, n: 2000, session: nfSession})
		}
	}
	for _, d := range []string{"at_least_once", "exactly_once"} {
		// The worker's default session timeout (45 s) against a 45 s cut:
		// the session ends about when the network heals.
		scenarios = append(scenarios, nfScenario{name: "45s-default-session/" + d, delivery: d, cut: 45 * time.Second, n: 3000, longOnly: true})
		// Three minutes: past every timeout (session, transaction, request);
		// CI runs the exactly-once one (the longer recovery), the long mode
		// both.
		scenarios = append(scenarios, nfScenario{name: "3m/" + d, delivery: d, cut: 3 * time.Minute, n: 2000, session: nfSession, longOnly: d == "at_least_once"})
		// Asymmetric: the broker gets the worker's requests (joins,
		// commits, produces) but its answers are dropped.
		scenarios = append(scenarios, nfScenario{name: "45s-answers-dropped/" + d, delivery: d, cut: 45 * time.Second, n: 2000, session: nfSession, dir: inbound, longOnly: d == "at_least_once"})
	}
	scenarios = append(scenarios, nfScenario{name: "20s-link-down/at_least_once", delivery: "at_least_once", cut: 20 * time.Second, n: 2000, session: nfSession, linkDown: true, longOnly: true})
	// The executor in mode persistent: children that outlive the cut.
	for _, d := range []string{"at_least_once", "exactly_once"} {
		scenarios = append(scenarios, nfScenario{name: "45s-persistent/" + d, delivery: d, cut: 45 * time.Second, n: 2000, session: nfSession, persistent: true})
	}
	// One of three workers cut: the group gives its partitions to the
	// other two, then takes it back after the heal.
	for _, d := range []string{"at_least_once", "exactly_once"} {
		scenarios = append(scenarios, nfScenario{name: "45s-one-of-three/" + d, delivery: d, cut: 45 * time.Second, n: 3000, session: nfSession, workers: 3, longOnly: d == "at_least_once"})
	}
	// Cut during a rebalance: a second worker joins, or leaves, as the
	// first is cut; the cut outlasts the session, so the group expels the
	// cut worker in the middle of that rebalance.
	for _, rb := range []string{"join", "leave", "rejoin"} {
		for _, d := range []string{"at_least_once", "exactly_once"} {
			// The joining worker joins within a second or two of its start
			// (startup_align_seconds = 1): 3,000 messages leave work to do
			// when it does.
			scenarios = append(scenarios, nfScenario{name: "20s-rebalance-" + rb + "/" + d, delivery: d, cut: 20 * time.Second, n: 3000, session: nfSession, workers: 2, rebalance: rb})
		}
	}
	// Cut while a transaction is open at the coordinator, past the
	// transaction timeout: the coordinator aborts it on its own.
	scenarios = append(scenarios, nfScenario{name: "50s-in-transaction/exactly_once", delivery: "exactly_once", cut: 50 * time.Second, n: 2000, session: nfSession, inTxn: true})
	long := os.Getenv("SVC_NETFAULT_LONG") != ""
	only := os.Getenv("SVC_NETFAULT_ONLY") // a part of the scenario names to run, while working on one
	scenarios = slices.DeleteFunc(scenarios, func(sc nfScenario) bool {
		return (sc.longOnly && !long && only == "") || !strings.Contains(sc.name, only)
	})
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			nfRepeat(t, true, func(t *testing.T) {
				res := runPartition(t, sc)
				t.Logf("lost %d, duplicates %d, ready %s after the heal, all delivered %s after the heal; readyz during the cut: %q",
					res.lost, res.dups, res.readyAfter.Round(100*time.Millisecond), res.doneAfter.Round(100*time.Millisecond), res.cutReasons)
			})
		})
	}
}

// silentFor finds the silence in the kafka_brokers reason.
var silentFor = regexp.MustCompile(`unreachable since \S+ \(no broker answered for (\d+)s`)

type nfResult struct {
	lost, dups            int
	readyAfter, doneAfter time.Duration
	cutReasons            []string
}

func runPartition(t *testing.T, sc nfScenario) nfResult {
	t.Helper()
	workers := max(sc.workers, 1)
	l := newLab(t, workers)
	broker := l.startBroker()
	l.produceBacklog(sc.n)
	sink := l.readSink()
	var ws []*nfWorker
	opts := nfWorkerOpts{delivery: sc.delivery, session: sc.session, persistent: sc.persistent}
	for i := 1; i <= workers; i++ {
		if (sc.rebalance == "join" || sc.rebalance == "rejoin") && i > 1 {
			break // joins at the cut
		}
		ws = append(ws, l.startWorker(l.host(fmt.Sprintf("w%d", i)), opts))
	}
	w := ws[0]
	// Cut once a tenth is delivered: the worker is then in the middle of
	// the backlog, tasks running and results on their way.
	wait.For(t, 2*time.Minute, "a tenth of the backlog delivered", func() (bool, string) {
		w.check(t)
		d, _, _ := sink.tally(sc.n)
		mine := sink.deliveredBy(w.name) // the worker to cut is at work too
		return d >= sc.n/10 && mine > 0, fmt.Sprintf("%d of %d delivered, %d by %s", d, sc.n, mine, w.host.name)
	})
	if sc.inTxn {
		select {
		case <-holdTxnProduce(broker, "svc-"+w.name):
		case <-time.After(wait.Long):
			t.Fatal("no transactional produce to cut during")
		}
	}
	var second *nfWorker // rebalance: the worker that joins or leaves
	release := func() {}
	if sc.rebalance != "" {
		second, release = rebalanceAtCut(t, l, broker, sink, &ws, sc, opts)
	}
	before, _, _ := sink.tally(sc.n)
	if sc.rebalance != "" && before == sc.n {
		t.Fatalf("the rebalance came after the whole backlog was delivered: the cut would prove nothing")
	}
	if sc.linkDown {
		w.host.linkDown()
	} else {
		w.host.partition(sc.dir, l.host("broker"))
	}
	cutAt := time.Now()
	release()

	// What /readyz says while the broker is unreachable.
	var mu sync.Mutex
	seen := map[string]bool{}
	var res nfResult
	for time.Since(cutAt) < sc.cut {
		ok, why := w.ready()
		if !ok {
			mu.Lock()
			if !seen[why] {
				seen[why] = true
				res.cutReasons = append(res.cutReasons, why)
			}
			mu.Unlock()
		}
		time.Sleep(500 * time.Millisecond)
	}
	during, _, _ := sink.tally(sc.n)
	if sc.rebalance == "leave" {
		if code := second.proc.Wait(t); code != 0 {
			t.Errorf("the leaving worker exited with %d", code)
		}
	}
	if workers > 1 && sc.rebalance == "" && during == before {
		t.Errorf("the %d workers not cut delivered nothing during the %s cut (%d of %d delivered)", workers-1, sc.cut, during, sc.n)
	}
	if sc.linkDown {
		w.host.linkUp()
	} else {
		w.host.heal()
	}
	healAt := time.Now()
	t.Logf("cut %s after %d of %d delivered; %d by the heal", sc.cut, before, sc.n, during)

	if sc.cut > 15*time.Second {
		// Past the session timeout the worker must say why it is not
		// ready: its brokers are unreachable.
		found := false
		for _, r := range res.cutReasons {
			if strings.Contains(r, "unreachable") {
				found = true
			}
		}
		if !found {
			t.Errorf("/readyz during a %s partition from the broker never said the brokers are unreachable; it said %q", sc.cut, res.cutReasons)
		}
		// It says so after 10 s of silence (docs/operations.md), whatever
		// the client was doing; the margin is for a loaded machine.
		for _, r := range res.cutReasons {
			if m := silentFor.FindStringSubmatch(r); m != nil {
				if n, _ := strconv.Atoi(m[1]); n > 15 {
					t.Errorf("/readyz said the brokers are unreachable only after %d s without an answer, want 10 s (+5 s of margin): %q", n, r)
				}
				break
			}
		}
	}

	// After the heal: when /readyz is ready again, and when every
	// message has been delivered, each within the bound.
	bound := sc.readyBound()
	var last string
	for res.readyAfter == 0 || res.doneAfter == 0 {
		for _, w := range ws {
			w.check(t)
		}
		if since := time.Since(healAt); since > bound {
			t.Fatalf("not recovered %s after the heal (ready after %s, all delivered after %s; 0 = not yet): %s; readyz: %s",
				bound, res.readyAfter, res.doneAfter, last, readyString(w))
		}
		if ok, _ := w.ready(); ok && res.readyAfter == 0 {
			res.readyAfter = time.Since(healAt)
		}
		d, missing, dups := sink.tally(sc.n)
		last = fmt.Sprintf("%d of %d delivered, %d duplicates", d, sc.n, dups)
		if missing == 0 && res.doneAfter == 0 {
			res.doneAfter = time.Since(healAt)
		}
		time.Sleep(250 * time.Millisecond)
	}
	// Late duplicates (a transaction committed after the reader caught
	// up) would show within a few commit intervals.
	time.Sleep(2 * time.Second)
	_, res.lost, res.dups = sink.tally(sc.n)
	if res.lost != 0 {
		t.Errorf("%d of %d messages lost", res.lost, sc.n)
	}
	if sc.delivery == "exactly_once" && res.dups != 0 {
		t.Errorf("exactly-once: %d duplicates for a read_committed reader", res.dups)
	}
	t.Logf("events: %v", w.events("partitions_lost", "partitions_revoked", "partitions_assigned", "offset_commit_failed",
		"kafka_fetch_error", "sink_breaker_open", "sink_breaker_closed", "kafka_transaction_aborted",
		"kafka_transaction_session_restart", "kafka_transaction_timed_out", "kafka_brokers_unreachable", "kafka_brokers_reachable"))
	if second != nil {
		t.Logf("%s (%s): %d results; events %v", second.host.name, sc.rebalance, sink.deliveredBy(second.name),
			second.events("partitions_assigned", "partitions_revoked", "partitions_lost", "kafka_group_left"))
	}
	if sc.inTxn && len(w.events("kafka_transaction_timed_out")) == 0 {
		t.Errorf("no kafka_transaction_timed_out: the coordinator did not time the open transaction out, the scenario proves nothing")
	}
	return res
}

func readyString(w *nfWorker) string {
	ok, why := w.ready()
	if ok {
		return "ready"
	}
	return why
}

// rebalanceAtCut starts the group's rebalance the scenario cuts the first
// worker in: it starts the second worker (join, rejoin) or stops the
// running second one (leave), and returns, with that worker, as the
// broker receives its JoinGroup or LeaveGroup (rejoin: the first worker's
// JoinGroup, held until the caller calls release once its cut is in
// place), so the caller's cut lands while the group rebalances. A worker
// that leaves is taken out of *ws.
func rebalanceAtCut(t *testing.T, l *lab, broker *kfake.Cluster, sink *sinkReader, ws *[]*nfWorker, sc nfScenario, opts nfWorkerOpts) (*nfWorker, func()) {
	t.Helper()
	key := kmsg.JoinGroup
	if sc.rebalance == "leave" {
		key = kmsg.LeaveGroup
		// Both share the backlog first.
		wait.For(t, 2*time.Minute, "both workers to deliver", func() (bool, string) {
			a, b := sink.deliveredBy((*ws)[0].name), sink.deliveredBy((*ws)[1].name)
			return a > 0 && b > 0, fmt.Sprintf("w1 %d, w2 %d", a, b)
		})
	}
	seen, cut := make(chan struct{}), make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { close(cut) }) }
	t.Cleanup(release)
	first := (*ws)[0].name
	broker.ControlKey(int16(key), func(req kmsg.Request) (kmsg.Response, error, bool) {
		if sc.rebalance == "rejoin" {
			if id := req.(*kmsg.JoinGroupRequest).InstanceID; id == nil || *id != first {
				return nil, nil, false // the joining worker's: kept for the next
			}
			broker.DropControl()
			close(seen)
			broker.SleepControl(func() { <-cut })
			return nil, nil, false // its answer goes into the cut
		}
		broker.DropControl()
		close(seen)
		return nil, nil, false // handled as usual: the rebalance begins
	})
	var second *nfWorker
	if sc.rebalance == "join" || sc.rebalance == "rejoin" {
		opts.alignSeconds = 1 // joins now, not at the next 10 s of the clock
		second = l.startWorker(l.host("w2"), opts)
		*ws = append(*ws, second)
	} else {
		second = (*ws)[1]
		*ws = (*ws)[:1]
		if err := second.proc.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-seen:
	case <-time.After(wait.Long):
		t.Fatalf("no %s reached the broker within %s", key.Name(), wait.Long)
	}
	return second, release
}
