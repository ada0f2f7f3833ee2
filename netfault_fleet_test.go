package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/net/websocket"

	"svc/worker/workertest/wait"
)

// The fleet across hosts: three workers on three hosts, each UI bound to
// its host's address with the fleet's token, its card naming that address
// (ui.public_url) and the two others trusted (fleet.trusted_urls). From
// the client host every worker's workers list shows the three running and
// trusted, a fleet-wide trace on any of them searches all three, and
// each streams Live to the page of another (its origin listed in
// ui.allowed_ws_origins).
//
// Then one worker is cut from its peers (every packet between the worker
// hosts dropped; the broker and the shared folder still reachable). It
// keeps consuming and delivering. Its card stays fresh (the folder is
// shared, not reached over the cut network), so the workers lists go on
// showing it running; what shows the cut is every view that asks the
// peers: the fleet trace and the fleet trends of the others name it
// missing ("did not answer within 3s"), and its own name the others. The
// views recover once the network heals.
//
// It runs nfRuns() times (2 in CI, one after the other; 10 in the long
// mode, SVC_NETFAULT_LONG=1).
func TestNetfaultFleet(t *testing.T) {
	needLab(t)
	t.Parallel()
	nfRepeat(t, false, runFleet)
}

func runFleet(t *testing.T) {
	l := newLab(t, 3)
	l.startBroker()
	hosts := []*labHost{l.host("w1"), l.host("w2"), l.host("w3")}
	var ws []*nfWorker
	for _, h := range hosts {
		peers := slices.DeleteFunc(slices.Clone(hosts), func(p *labHost) bool { return p == h })
		ws = append(ws, l.startWorker(h, nfWorkerOpts{delivery: "at_least_once", session: nfSession, fleet: peers, cache: true}))
	}
	for _, w := range ws {
		w.waitReady(t, wait.Long)
	}
	names := []string{ws[0].name, ws[1].name, ws[2].name}
	slices.Sort(names)
	client := l.host("client").httpClient()
	client.Timeout = 10 * time.Second

	// Every worker lists the three, running and trusted.
	for _, w := range ws {
		wait.For(t, wait.Long, w.host.name+" to list the three workers running", func() (bool, string) {
			var list struct {
				Workers []struct {
					Name, State, URL string
					Trusted          bool
				} `json:"workers"`
			}
			if err := nfGet(client, w.ui+"/api/v1/fleet/workers", &list); err != nil {
				return false, err.Error()
			}
			var got []string
			ok := len(list.Workers) == 3
			for _, x := range list.Workers {
				got = append(got, fmt.Sprintf("%s %s %s trusted=%v", x.Name, x.State, x.URL, x.Trusted))
				ok = ok && x.State == "running" && x.Trusted && strings.HasPrefix(x.URL, "http://10.213.0.1")
			}
			return ok, strings.Join(got, "; ")
		})
	}
	// A fleet-wide trace on each searches the three.
	for _, w := range ws {
		wait.For(t, wait.Long, w.host.name+"'s fleet trace to search the three", func() (bool, string) {
			sources, missing, err := nfFleetTrace(client, w)
			return err == nil && slices.Equal(sources, names) && len(missing) == 0, fmt.Sprintf("sources %v, missing %v, %v", sources, missing, err)
		})
	}

	// A steady stream from the client host, 50 messages a second, until
	// the end of the test.
	sink := l.readSink()
	var produced int
	var pmu sync.Mutex
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	cl := l.kafkaClient(kgo.DefaultProduceTopic(nfIn))
	go func() {
		defer close(done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ctx.Err() == nil; i += 5 {
			var recs []*kgo.Record
			for j := i; j < i+5; j++ {
				recs = append(recs, &kgo.Record{Key: []byte(fmt.Sprintf("k-%05d", j)), Value: []byte(nfValue(j))})
			}
			if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				return
			}
			pmu.Lock()
			produced = i + 5
			pmu.Unlock()
			select {
			case <-tick.C:
			case <-ctx.Done():
			}
		}
	}()
	t.Cleanup(func() { stop(); <-done })
	// Live across hosts: the page served by the next worker streams from
	// each worker, its socket opened with that page's origin.
	for i, w := range ws {
		page := ws[(i+1)%len(ws)]
		nfLiveTasks(t, l.host("client"), w, page.ui)
	}
	cut, others := ws[0], ws[1:]
	wait.For(t, wait.Long, cut.host.name+" to deliver", func() (bool, string) {
		n := sink.deliveredBy(cut.name)
		return n > 0, fmt.Sprintf("%d delivered", n)
	})

	// Its rate before the cut, over 5 s, beside its rate during the cut.
	b0, t0 := sink.deliveredBy(cut.name), time.Now()
	time.Sleep(5 * time.Second)
	rateBefore := float64(sink.deliveredBy(cut.name)-b0) / time.Since(t0).Seconds()

	// The cache exchange works across the hosts: each worker's rows
	// reach the two others.
	for _, w := range ws {
		wait.For(t, wait.Long, w.host.name+" to hold cache rows of the two others", func() (bool, string) {
			rows, err := nfCacheRows(client, w, "")
			origins := map[string]int{}
			for _, r := range rows {
				origins[r.Origin]++
			}
			ok := err == nil
			for _, o := range ws {
				ok = ok && origins[o.name] > 0
			}
			return ok, fmt.Sprintf("rows by origin %v (%v)", origins, err)
		})
	}

	cut.host.partition(both, hosts[1], hosts[2])
	cutAt := time.Now()
	before := sink.deliveredBy(cut.name)
	cycles0 := nfMetric(t, client, cut, "svc_cache_exchange_cycles_total", "")
	for _, o := range others {
		wait.For(t, 30*time.Second, o.host.name+"'s fleet views to miss "+cut.host.name, func() (bool, string) {
			_, missing, err := nfFleetTrace(client, o)
			tm, terr := nfFleetTrendsMissing(client, o)
			return err == nil && terr == nil && missing[cut.name] != "" && tm[cut.name] != "",
				fmt.Sprintf("trace missing %v (%v); trends missing %v (%v)", missing, err, tm, terr)
		})
	}
	_, missing, err := nfFleetTrace(client, cut)
	if err != nil || missing[others[0].name] == "" || missing[others[1].name] == "" {
		t.Errorf("%s's fleet trace during the cut: missing %v, %v; want both peers", cut.host.name, missing, err)
	}
	var lists []string
	for _, o := range others {
		lists = append(lists, nfStateOf(client, o, cut.name))
	}
	// The cut worker goes on consuming and delivering.
	wait.For(t, 30*time.Second, cut.host.name+" to keep delivering during the cut", func() (bool, string) {
		cut.check(t)
		n := sink.deliveredBy(cut.name)
		return n > before+50, fmt.Sprintf("%d delivered by the cut, %d since", before, n-before)
	})
	time.Sleep(time.Until(cutAt.Add(12 * time.Second))) // several pulls' timeouts
	during := sink.deliveredBy(cut.name) - before
	cutFor := time.Since(cutAt)
	// Its exchange pulls fail within their timeout and its cycles go on;
	// the rows it writes meanwhile stay on its side of the cut, the
	// others' on theirs.
	cycles := nfMetric(t, client, cut, "svc_cache_exchange_cycles_total", "") - cycles0
	failed := nfMetric(t, client, cut, "svc_fleet_peer_requests_total", "timeout") + nfMetric(t, client, cut, "svc_fleet_peer_requests_total", "unreachable")
	if cycles < 1 || failed < 1 {
		t.Errorf("%s's cache exchange during a %s cut: %v cycles, %v pulls failed; want pulls failing within %s and cycles going on",
			cut.host.name, cutFor.Round(time.Second), cycles, failed, nfCacheTimeout)
	}
	mine := nfNewestOwnRow(t, client, cut, cutAt)
	theirs := nfNewestOwnRow(t, client, others[0], cutAt)
	for _, o := range others {
		if _, ok := nfCacheRow(t, client, o, mine); ok {
			t.Errorf("%s holds %s, written by %s during the cut", o.host.name, mine, cut.host.name)
		}
	}
	if _, ok := nfCacheRow(t, client, cut, theirs); ok {
		t.Errorf("%s holds %s, written by %s during the cut", cut.host.name, theirs, others[0].host.name)
	}
	t.Logf("during the cut, %s's cache exchange: %v cycles in %s (%.1f s a cycle), %v pulls failed (timeout %s)",
		cut.host.name, cycles, cutFor.Round(time.Second), cutFor.Seconds()/max(cycles, 1), failed, nfCacheTimeout)
	_, traceMissing, _ := nfFleetTrace(client, others[0])
	trendsMissing, _ := nfFleetTrendsMissing(client, others[0])
	t.Logf("during a %s cut: %s delivered %d (%.1f/s; %.1f/s before the cut); the others' workers lists show it %v; on %s, trace missing %v, trends missing %v",
		cutFor.Round(time.Second), cut.host.name, during, float64(during)/cutFor.Seconds(), rateBefore, lists, others[0].host.name, traceMissing, trendsMissing)

	cut.host.heal()
	healAt := time.Now()
	for _, w := range ws {
		wait.For(t, 30*time.Second, w.host.name+"'s fleet views to recover", func() (bool, string) {
			sources, missing, err := nfFleetTrace(client, w)
			tm, terr := nfFleetTrendsMissing(client, w)
			return err == nil && terr == nil && slices.Equal(sources, names) && len(missing) == 0 && len(tm) == 0,
				fmt.Sprintf("trace sources %v missing %v (%v); trends missing %v (%v)", sources, missing, err, tm, terr)
		})
	}
	t.Logf("fleet views recovered %s after the heal", time.Since(healAt).Round(100*time.Millisecond))
	// The rows written on each side during the cut cross once it heals.
	for _, x := range []struct {
		w   *nfWorker
		key string
	}{{others[0], mine}, {others[1], mine}, {cut, theirs}} {
		wait.For(t, 30*time.Second, x.w.host.name+" to pull "+x.key+" after the heal", func() (bool, string) {
			r, ok := nfCacheRow(t, client, x.w, x.key)
			return ok, fmt.Sprintf("%+v", r)
		})
	}
	t.Logf("cache rows of the cut crossed %s after the heal; %s's exchange events %v", time.Since(healAt).Round(100*time.Millisecond),
		cut.host.name, cut.events("cache_exchange_peer_ok", "cache_exchange_peer_failed"))
	if ev := cut.events("cache_exchange_peer_ok", "cache_exchange_peer_failed"); !slices.Contains(ev, "cache_exchange_peer_failed") || ev[len(ev)-1] != "cache_exchange_peer_ok" {
		t.Errorf("%s's exchange events %v: want cache_exchange_peer_failed in the cut, cache_exchange_peer_ok after the heal", cut.host.name, ev)
	}

	stop()
	<-done
	pmu.Lock()
	n := produced
	pmu.Unlock()
	wait.For(t, 2*time.Minute, "every message delivered", func() (bool, string) {
		d, missing, dups := sink.tally(n)
		return missing == 0, fmt.Sprintf("%d of %d delivered, %d duplicates", d, n, dups)
	})
}

// nfLiveTasks opens w's Live stream (/ws) from host h as the page served
// at origin would, subscribes to tasks and waits for a tasks frame.
func nfLiveTasks(t *testing.T, h *labHost, w *nfWorker, origin string) {
	t.Helper()
	cfg, err := websocket.NewConfig(strings.Replace(w.ui, "http://", "ws://", 1)+"/ws?token="+nfToken, origin)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := h.dial(context.Background(), "tcp", strings.TrimPrefix(w.ui, "http://"))
	if err != nil {
		t.Fatalf("dial %s: %v", w.ui, err)
	}
	defer conn.Close()
	ws, err := websocket.NewClient(cfg, conn)
	if err != nil {
		t.Fatalf("%s's Live socket from the page at %s: %v", w.host.name, origin, err)
	}
	if err := websocket.Message.Send(ws, `{"subscribe":["tasks"]}`); err != nil {
		t.Fatalf("%s's Live socket: subscribe: %v", w.host.name, err)
	}
	deadline := time.Now().Add(30 * time.Second)
	var streams []string
	for time.Now().Before(deadline) {
		_ = ws.SetReadDeadline(deadline)
		var msg string
		if err := websocket.Message.Receive(ws, &msg); err != nil {
			t.Fatalf("%s's Live socket from the page at %s: %v after frames %v", w.host.name, origin, err, streams)
		}
		var f struct {
			Stream string          `json:"stream"`
			Data   json.RawMessage `json:"data"`
		}
		_ = json.Unmarshal([]byte(msg), &f)
		streams = append(streams, f.Stream)
		if f.Stream == "tasks" || f.Stream == "batch" && strings.Contains(string(f.Data), `"stream":"tasks"`) {
			return
		}
	}
	t.Fatalf("%s's Live socket from the page at %s: no tasks frame, frames %v", w.host.name, origin, streams)
}

// nfGet GETs a worker's API with the fleet's token, decoding JSON.
func nfGet(c *http.Client, u string, v any) error {
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	req.Header.Set("Authorization", "Bearer "+nfToken)
	r, err := c.Do(req)
	if err != nil {
		return err
	}
	defer r.Body.Close()
	b, _ := io.ReadAll(r.Body)
	if r.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %d %s", u, r.StatusCode, b)
	}
	return json.Unmarshal(b, v)
}

// nfFleetTrace runs a fleet-wide trace (scope cluster) on w: the workers
// whose live files it searched, and the missing ones with the reason.
func nfFleetTrace(c *http.Client, w *nfWorker) (sources []string, missing map[string]string, err error) {
	var a struct {
		Sources []string `json:"sources"`
		Missing []struct {
			Worker, Reason string
		} `json:"missing"`
	}
	if err := nfGet(c, w.ui+"/api/v1/debug/trace?task_id=netfault-none", &a); err != nil {
		return nil, nil, err
	}
	missing = map[string]string{}
	for _, m := range a.Missing {
		missing[m.Worker] = m.Reason
	}
	slices.Sort(a.Sources)
	return a.Sources, missing, nil
}

// nfFleetTrendsMissing is the workers w's fleet trends could not ask.
func nfFleetTrendsMissing(c *http.Client, w *nfWorker) (map[string]string, error) {
	var a struct {
		Missing []struct {
			Worker, Reason string
		} `json:"missing"`
	}
	if err := nfGet(c, w.ui+"/api/v1/dashboard/trends?scope=fleet", &a); err != nil {
		return nil, err
	}
	m := map[string]string{}
	for _, x := range a.Missing {
		m[x.Worker] = x.Reason
	}
	return m, nil
}

// nfStateOf is the state w's workers list gives the named worker.
func nfStateOf(c *http.Client, w *nfWorker, name string) string {
	var list struct {
		Workers []struct{ Name, State string } `json:"workers"`
	}
	if err := nfGet(c, w.ui+"/api/v1/fleet/workers", &list); err != nil {
		return err.Error()
	}
	for _, x := range list.Workers {
		if x.Name == name {
			return w.host.name + ": " + x.State
		}
	}
	return w.host.name + ": not listed"
}

// nfCacheRows is w's cluster cache rows whose key starts with prefix,
// newest first (at most 1,000).
func nfCacheRows(c *http.Client, w *nfWorker, prefix string) ([]cacheRow, error) {
	var a struct {
		Rows []cacheRow `json:"rows"`
	}
	err := nfGet(c, w.ui+"/api/v1/debug/cache?scope=cluster&limit=1000&prefix="+url.QueryEscape(prefix), &a)
	return a.Rows, err
}

// nfCacheRow is w's cluster row of key.
func nfCacheRow(t *testing.T, c *http.Client, w *nfWorker, key string) (cacheRow, bool) {
	t.Helper()
	rows, err := nfCacheRows(c, w, key)
	if err != nil {
		t.Fatalf("%s's cache: %v", w.host.name, err)
	}
	for _, r := range rows {
		if r.Key == key {
			return r, true
		}
	}
	return cacheRow{}, false
}

// nfNewestOwnRow is the key of the newest cluster row w wrote itself,
// which must be stamped after since.
func nfNewestOwnRow(t *testing.T, c *http.Client, w *nfWorker, since time.Time) string {
	t.Helper()
	rows, err := nfCacheRows(c, w, "")
	if err != nil {
		t.Fatalf("%s's cache: %v", w.host.name, err)
	}
	for _, r := range rows {
		if r.Origin == w.name && r.TSms > since.UnixMilli() {
			return r.Key
		}
	}
	t.Fatalf("%s wrote no cache row since %s", w.host.name, since.Format(time.RFC3339Nano))
	return ""
}

// nfHistMean is the count and mean of w's histogram name.
func nfHistMean(t *testing.T, c *http.Client, w *nfWorker, name string) (int, time.Duration) {
	t.Helper()
	var d struct {
		Families []struct {
			Name    string
			Samples []struct{ Value, Sum float64 }
		}
	}
	if err := nfGet(c, w.ui+"/api/v1/debug/metrics", &d); err != nil {
		t.Fatalf("%s's metrics: %v", w.host.name, err)
	}
	for _, f := range d.Families {
		if f.Name == name && len(f.Samples) == 1 && f.Samples[0].Value > 0 {
			return int(f.Samples[0].Value), time.Duration(f.Samples[0].Sum / f.Samples[0].Value * float64(time.Second))
		}
	}
	return 0, 0
}

// nfMetric sums w's samples of the metric family name (with label
// result=result unless result is empty).
func nfMetric(t *testing.T, c *http.Client, w *nfWorker, name, result string) float64 {
	t.Helper()
	var d struct {
		Families []struct {
			Name    string
			Samples []struct {
				Labels map[string]string
				Value  float64
			}
		}
	}
	if err := nfGet(c, w.ui+"/api/v1/debug/metrics", &d); err != nil {
		t.Fatalf("%s's metrics: %v", w.host.name, err)
	}
	var v float64
	for _, f := range d.Families {
		if f.Name != name {
			continue
		}
		for _, s := range f.Samples {
			if result == "" || s.Labels["result"] == result {
				v += s.Value
			}
		}
	}
	return v
}
