package cache

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"svc/worker/fleet"
	"svc/worker/payload"
	"svc/worker/workertest"
)

// peers is a PeerSource whose list the test sets.
type peers struct {
	mu      sync.Mutex
	list    []fleet.Peer
	contact map[string]bool
}

func (p *peers) Peers() []fleet.Peer {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]fleet.Peer(nil), p.list...)
}
func (p *peers) Contacted(name string, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.contact == nil {
		p.contact = map[string]bool{}
	}
	p.contact[name] = ok
}
func (p *peers) set(list ...fleet.Peer) { p.mu.Lock(); defer p.mu.Unlock(); p.list = list }

// serve answers the peer route from s the way the UI server does, and
// counts requests and the scopes asked for.
func serve(t *testing.T, s *Store) (*httptest.Server, *atomic.Int64, *atomic.Value) {
	t.Helper()
	var hits atomic.Int64
	var asked atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		asked.Store(r.URL.Query().Get("scopes"))
		limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
		p, err := s.Changes(r.Context(), strings.Split(r.URL.Query().Get("scopes"), ","), r.URL.Query().Get("since"), limit)
		if err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		json.NewEncoder(w).Encode(p.Wire())
	}))
	t.Cleanup(srv.Close)
	return srv, &hits, &asked
}

type exch struct {
	*Exchange
	store *Store
	reg   *prometheus.Registry
	peers *peers
	logs  *workertest.Logs
}

func newExchange(t *testing.T, self, cluster string, timeout time.Duration) exch {
	t.Helper()
	return exchangeOn(t, open(t, t.TempDir(), self).Store, cluster, timeout)
}

// exchangeOn is an exchange pulling into s.
func exchangeOn(t *testing.T, s *Store, cluster string, timeout time.Duration) exch {
	t.Helper()
	e := exch{store: s, reg: prometheus.NewRegistry(), peers: &peers{}, logs: &workertest.Logs{}}
	x, err := NewExchange(ExchangeConfig{Store: s, Peers: e.peers, Cluster: cluster, Interval: time.Hour, Timeout: timeout, Registry: e.reg, Logger: e.logs.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	e.Exchange = x
	return e
}

func (e exch) requests(t *testing.T, result string) float64 {
	return workertest.Metric(t, e.reg, "svc_fleet_peer_requests_total", "result", result)
}

func TestPullTakesClusterAndGlobalRowsOfOwnCluster(t *testing.T) {
	t.Parallel()
	a := open(t, t.TempDir(), "a")
	srv, _, asked := serve(t, a.Store)
	for i := range 700 { // more than one page
		put(t, a.Store, ScopeCluster, "c"+strconv.Itoa(i), "v")
	}
	put(t, a.Store, ScopeGlobal, "g", "v")
	put(t, a.Store, ScopeLocal, "l", "v")
	b := newExchange(t, "b", "eu", 10*time.Second)
	b.peers.set(fleet.Peer{Name: "a", Cluster: "eu", URL: srv.URL, Marks: &fleet.Marks{Cluster: 1, Global: 1}})
	b.cycle(t.Context())
	if st := b.store.Stats(); st.Rows != 701 {
		t.Errorf("b holds %d rows, want 701 (700 cluster + 1 global, no local)", st.Rows)
	}
	if _, ok := get(t, b.store, ScopeLocal, "l"); ok {
		t.Error("a local row left its worker")
	}
	if r, _ := get(t, b.store, ScopeGlobal, "g"); r.Origin != "a" {
		t.Errorf("pulled row origin = %q, want a", r.Origin)
	}
	if asked.Load() != "cluster,global" || b.requests(t, "ok") != 2 {
		t.Errorf("asked %v in %v requests", asked.Load(), b.requests(t, "ok"))
	}
}

func TestPullTakesOnlyGlobalRowsAcrossClusters(t *testing.T) {
	t.Parallel()
	a := open(t, t.TempDir(), "a")
	srv, _, asked := serve(t, a.Store)
	put(t, a.Store, ScopeCluster, "c", "v")
	put(t, a.Store, ScopeGlobal, "g", "v")
	b := newExchange(t, "b", "us", 10*time.Second)
	b.peers.set(fleet.Peer{Name: "a", Cluster: "eu", URL: srv.URL, Marks: &fleet.Marks{Global: 1}})
	b.cycle(t.Context())
	if _, ok := get(t, b.store, ScopeCluster, "c"); ok || asked.Load() != "global" {
		t.Errorf("cluster row crossed clusters (asked %v)", asked.Load())
	}
	if _, ok := get(t, b.store, ScopeGlobal, "g"); !ok {
		t.Error("global row not pulled")
	}
}

// Cards are pulled again only when their marks moved; static peers every
// cycle, and their outcome reaches the registry.
func TestPullFollowsMarks(t *testing.T) {
	t.Parallel()
	a := open(t, t.TempDir(), "a")
	srv, hits, _ := serve(t, a.Store)
	b := newExchange(t, "b", "eu", 10*time.Second)
	card := fleet.Peer{Name: "a", Cluster: "eu", URL: srv.URL, Marks: &fleet.Marks{Cluster: 5}}
	b.peers.set(card)
	b.cycle(t.Context())
	b.cycle(t.Context())
	if hits.Load() != 1 {
		t.Fatalf("requests with unmoved marks = %d, want 1", hits.Load())
	}
	card.Marks = &fleet.Marks{Cluster: 5, Global: 7}
	b.peers.set(card)
	b.cycle(t.Context())
	if hits.Load() != 2 {
		t.Fatalf("requests after the marks moved = %d, want 2", hits.Load())
	}
	b.peers.set(fleet.Peer{Name: "a", Cluster: "eu", URL: srv.URL, Static: true})
	b.cycle(t.Context())
	b.cycle(t.Context())
	if hits.Load() != 4 {
		t.Errorf("requests to a static peer over 2 cycles = %d, want 2 more", hits.Load()-2)
	}
	b.peers.set(fleet.Peer{Name: "a", Cluster: "eu", URL: srv.URL}) // a card serving nothing
	b.cycle(t.Context())
	if hits.Load() != 4 {
		t.Error("a card without marks was pulled")
	}
	if !b.peers.contact["a"] {
		t.Error("the static peer's success did not reach the registry")
	}
}

// Peers that misbehave get nothing applied; each request is counted by
// what went wrong.
func TestHostilePeers(t *testing.T) {
	t.Parallel()
	row := func(origin, scope string) WireRow {
		return WireRow{Key: "k", Value: "evil", ValueEncoding: payload.UTF8, TSms: time.Now().UnixMilli(), Scope: scope, Origin: origin}
	}
	page := func(rows ...WireRow) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			json.NewEncoder(w).Encode(WirePage{Rows: rows, Next: "0123456789abcdef-1"})
		}
	}
	var thirdHit atomic.Bool
	third := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		thirdHit.Store(true)
		page(row("evil", ScopeGlobal))(w, r)
	}))
	t.Cleanup(third.Close)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	cases := []struct {
		name, cluster, result string
		h                     http.HandlerFunc
	}{
		{"foreign origin", "eu", "refused", page(row("evil", ScopeGlobal), row("someone-else", ScopeGlobal))},
		{"unasked local scope", "eu", "refused", page(row("evil", ScopeLocal))},
		{"cluster rows to another cluster", "us", "refused", page(row("evil", ScopeCluster))},
		{"no timestamp", "eu", "refused", page(WireRow{Key: "k", Value: "v", ValueEncoding: payload.UTF8, Scope: ScopeGlobal, Origin: "evil"})},
		{"oversized value", "eu", "refused", page(WireRow{Key: "k", Value: strings.Repeat("v", MaxValueBytes+1), ValueEncoding: payload.UTF8, TSms: 1, Scope: ScopeGlobal, Origin: "evil"})},
		{"redirect", "eu", "redirect", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, third.URL+PeerPath, http.StatusFound)
		}},
		{"10 MiB body", "eu", "too_large", func(w http.ResponseWriter, r *http.Request) {
			w.Write([]byte(`{"rows":[{"key":"k","value":"`))
			w.Write([]byte(strings.Repeat("v", 10<<20)))
			w.Write([]byte(`","value_encoding":"utf-8","ts_ms":1,"scope":"global","origin":"evil"}]}`))
		}},
		{"hang", "eu", "timeout", func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}},
		{"slow body", "eu", "timeout", func(w http.ResponseWriter, r *http.Request) {
			w.Write([]byte(`{"rows":[`))
			w.(http.Flusher).Flush()
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}},
		{"not json", "eu", "invalid", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("<html>")) }},
		{"not serving", "eu", "not_serving", http.NotFound},
		{"server error", "eu", "http_error", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(500) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(c.h)
			t.Cleanup(srv.Close)
			timeout := 10 * time.Second
			if c.result == "timeout" {
				timeout = 300 * time.Millisecond
			}
			b := newExchange(t, "b", "eu", timeout)
			b.peers.set(fleet.Peer{Name: "evil", Cluster: c.cluster, URL: srv.URL, Static: true})
			b.cycle(t.Context())
			if got := b.requests(t, c.result); got != 1 {
				t.Errorf("requests counted %s = %v, want 1", c.result, got)
			}
			if st := b.store.Stats(); st.Rows != 0 {
				t.Errorf("%d rows applied, want none", st.Rows)
			}
			if b.peers.contact["evil"] {
				t.Error("a failed request reported the static peer reachable")
			}
			if len(b.logs.Named("cache_exchange_peer_failed")) != 1 {
				t.Errorf("logs: %s", b.logs.String())
			}
		})
	}
	if thirdHit.Load() {
		t.Error("a redirect was followed to a third server")
	}
}

// The same conflicting writes reach the same winner on every worker,
// whatever order the pulls happen in.
func TestConflictsResolveTheSameEverywhere(t *testing.T) {
	t.Parallel()
	stores := map[string]opened{}
	urls := map[string]string{}
	for _, n := range []string{"a", "b", "c"} {
		stores[n] = open(t, t.TempDir(), n)
		srv, _, _ := serve(t, stores[n].Store)
		urls[n] = srv.URL
	}
	stores["a"].clock.ms.Store(5000)
	stores["b"].clock.ms.Store(5000) // same ms: the origin name decides
	stores["c"].clock.ms.Store(4000)
	for n, s := range stores {
		put(t, s.Store, ScopeCluster, "k", "from "+n)
	}
	for _, n := range []string{"c", "a", "b"} {
		x := exchangeOn(t, stores[n].Store, "eu", 10*time.Second)
		var list []fleet.Peer
		for _, o := range []string{"c", "b", "a"} {
			if o != n {
				list = append(list, fleet.Peer{Name: o, Cluster: "eu", URL: urls[o], Static: true})
			}
		}
		x.peers.set(list...)
		x.cycle(t.Context())
	}
	for n, s := range stores {
		if r, _ := get(t, s.Store, ScopeCluster, "k"); string(r.Value) != "from b" || r.Origin != "b" || r.TSms != 5000 {
			t.Errorf("%s holds %q from %s at %d, want b's write", n, r.Value, r.Origin, r.TSms)
		}
	}
}

// A pulled row stamped further ahead of this worker's clock than the
// documented skew (30 s) is stamped now + 30 s when received, so one
// peer's clock (or lie) cannot drag this worker's later writes forward.
// Clamped rows are counted, and logged once per peer.
func TestFutureRowsAreClampedWhenReceived(t *testing.T) {
	t.Parallel()
	const skew = 30 * time.Second // MaxFutureSkew, as documented
	now := time.Now().UnixMilli()
	a := open(t, t.TempDir(), "a")
	a.clock.ms.Store(now + (23*time.Hour + 54*time.Minute).Milliseconds())
	put(t, a.Store, ScopeGlobal, "k", "from the future")
	srv, _, _ := serve(t, a.Store)
	bs := open(t, t.TempDir(), "b")
	bs.clock.ms.Store(now)
	b := exchangeOn(t, bs.Store, "eu", 10*time.Second)
	b.peers.set(fleet.Peer{Name: "a", Cluster: "eu", URL: srv.URL, Static: true})
	b.cycle(t.Context())
	latest := now + skew.Milliseconds()
	if r, ok := get(t, bs.Store, ScopeGlobal, "k"); !ok || r.TSms != latest || r.Origin != "a" {
		t.Errorf("pulled row = %+v (found %v), want a's row stamped %d (now + %v)", r, ok, latest, skew)
	}

	// b writes the key it pulled, then another: neither runs further
	// ahead than the skew.
	bs.clock.ms.Store(now + 1000)
	put(t, bs.Store, ScopeGlobal, "k", "mine")
	put(t, bs.Store, ScopeGlobal, "other", "mine")
	for _, k := range []string{"k", "other"} {
		if r, _ := get(t, bs.Store, ScopeGlobal, k); r.TSms > latest+2 {
			t.Errorf("b's write of %s is stamped %v ahead of its clock", k, time.Duration(r.TSms-now-1000)*time.Millisecond)
		}
	}

	// Two days ahead, in a later pull: clamped and counted, not logged again.
	a.clock.ms.Store(now + (48 * time.Hour).Milliseconds())
	put(t, a.Store, ScopeGlobal, "k2", "further")
	b.cycle(t.Context())
	if r, ok := get(t, bs.Store, ScopeGlobal, "k2"); !ok || r.TSms != now+1000+skew.Milliseconds() {
		t.Errorf("second pulled row = %+v (found %v), want it stamped b's now + %v", r, ok, skew)
	}
	if got := workertest.Metric(t, b.reg, "svc_cache_exchange_clamped_total"); got != 2 {
		t.Errorf("svc_cache_exchange_clamped_total = %v, want 2", got)
	}
	if got := b.requests(t, "ok"); got != 2 {
		t.Errorf("ok requests = %v, want 2", got)
	}
	logs := b.logs.Named("cache_exchange_peer_clock_ahead")
	if len(logs) != 1 || logs[0]["peer"] != "a" || logs[0]["level"] != "WARN" {
		t.Errorf("clock-ahead logs = %v, want one for peer a", logs)
	}
}
