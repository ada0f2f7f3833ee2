package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"svc/worker/cache"
	"svc/worker/fleet"
	"svc/worker/workertest/wait"
)

// Hosts whose clocks are off. The system clock cannot be set per network
// namespace, so the peers on the skewed host (w2) are played by the test
// the way a worker there would behave: each writes its card into the
// shared folder every second stamped with its clock (now + skew), and
// serves its cache rows, stamped with that clock too, at
// /api/v1/peer/cache/changes on w2's address. The real worker on w1
// (cache and its exchange on) must show what docs/operations.md states:
//
//   - a peer 10 s ahead (within the 30 s skew) is listed running, its rows
//     are pulled with their stamps, and a later write of the same key on
//     w1 still wins (a worker's own write is stamped after the row it
//     replaces);
//   - a peer 3 minutes ahead is not listed at all (fleet_card_clock_ahead)
//     and not pulled;
//   - a peer 3 minutes behind is listed unreachable (its heartbeat is 3
//     minutes old by w1's clock) and not pulled, although it is alive.
func TestNetfaultClockSkew(t *testing.T) {
	needLab(t)
	t.Parallel()
	nfRepeat(t, false, runClockSkew)
}

// skewedPeer is a worker on a host whose clock is off by skew, as far as
// the card folder and the cache exchange can tell.
type skewedPeer struct {
	name string
	skew time.Duration
	url  string
	row  cache.WireRow // the one cluster row it wrote
	// asked is set when anyone asked it for its rows.
	asked atomic.Bool
}

func (p *skewedPeer) served() bool { return p.asked.Load() }

func runClockSkew(t *testing.T) {
	l := newLab(t, 2)
	l.startBroker()
	h1, h2 := l.host("w1"), l.host("w2")
	w := l.startWorker(h1, nfWorkerOpts{delivery: "at_least_once", session: nfSession, fleet: []*labHost{h2}, cache: true})
	w.waitReady(t, wait.Long)
	client := l.host("client").httpClient()
	client.Timeout = 10 * time.Second

	// The key the peer 10 s ahead writes, which w1 writes afterwards.
	const contested = 9999
	peers := []*skewedPeer{
		{name: "skew-ahead-10s", skew: 10 * time.Second},
		{name: "skew-ahead-3m", skew: 3 * time.Minute},
		{name: "skew-behind-3m", skew: -3 * time.Minute},
	}
	ctx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	start := time.Now()
	for i, p := range peers {
		port := nfUIPort + 1 + i
		p.url = fmt.Sprintf("http://%s:%d", h2.ip, port)
		key := "nf:skew-" + p.name
		if i == 0 {
			key = "nf:" + nfValue(contested)
		}
		p.row = cache.WireRow{Key: key, Value: "from-" + p.name, ValueEncoding: "utf-8", ValueSize: len("from-" + p.name),
			TSms: start.Add(p.skew).UnixMilli(), Scope: "cluster", Origin: p.name}
		ln, err := h2.listen(port)
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: p}
		go func() { _ = srv.Serve(ln) }()
		t.Cleanup(func() { _ = srv.Close() })
		go p.heartbeat(ctx, l.shared, start)
	}

	// What w1 lists: the peer within the skew running, the one behind
	// unreachable, the one far ahead not at all.
	wait.For(t, wait.Long, "w1 to list the skewed peers", func() (bool, string) {
		var list struct {
			Workers []struct {
				Name, State    string
				HeartbeatAgeMS *int64 `json:"heartbeat_age_ms"`
			} `json:"workers"`
		}
		if err := nfGet(client, w.ui+"/api/v1/fleet/workers", &list); err != nil {
			return false, err.Error()
		}
		got := map[string]string{}
		var all []string
		for _, x := range list.Workers {
			got[x.Name] = x.State
			all = append(all, fmt.Sprintf("%s=%s (heartbeat %v ms ago)", x.Name, x.State, *x.HeartbeatAgeMS))
		}
		_, listedAhead := got["skew-ahead-3m"]
		return got["skew-ahead-10s"] == "running" && got["skew-behind-3m"] == "unreachable" && !listedAhead, strings.Join(all, "; ")
	})
	// The card far ahead may be written after the listing above held (its
	// heartbeat runs on its own): the warning comes with the next read.
	wait.For(t, wait.Long, "w1 to log fleet_card_clock_ahead for the card 3 minutes ahead", func() (bool, string) {
		return len(w.events("fleet_card_clock_ahead")) > 0, "not logged"
	})

	// The exchange pulls the peer within the skew, stamps and all.
	wait.For(t, wait.Long, "w1 to pull the row of the peer 10 s ahead", func() (bool, string) {
		r, ok := nfCacheRow(t, client, w, peers[0].row.Key)
		return ok && r.Origin == peers[0].name && r.TSms == peers[0].row.TSms, fmt.Sprintf("%+v", r)
	})
	// Several exchange cycles later, nothing from the others.
	time.Sleep(3 * time.Second)
	for _, p := range peers[1:] {
		if r, ok := nfCacheRow(t, client, w, p.row.Key); ok {
			t.Errorf("w1 pulled %s's row %+v: a peer %s off should not be pulled", p.name, r, p.skew)
		}
		if p.served() {
			t.Errorf("w1 asked %s for its rows: a peer %s off should not be pulled", p.name, p.skew)
		}
	}

	// w1 writes the contested key after the pull: its write wins,
	// stamped after the row of the peer 10 s ahead, not by its own clock.
	cl := l.kafkaClient(kgo.DefaultProduceTopic(nfIn))
	if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte("k-contested"), Value: []byte(nfValue(contested))}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	wait.For(t, wait.Long, "w1's own write of the contested key to win", func() (bool, string) {
		r, ok := nfCacheRow(t, client, w, peers[0].row.Key)
		return ok && r.Origin == w.name && r.Value == nfValue(contested) && r.TSms > peers[0].row.TSms, fmt.Sprintf("%+v", r)
	})
	r, _ := nfCacheRow(t, client, w, peers[0].row.Key)
	t.Logf("w1's write of %s: stamped %d ms after the 10 s-ahead peer's row it replaced, %.1f s ahead of w1's clock",
		peers[0].row.Key, r.TSms-peers[0].row.TSms, float64(r.TSms-time.Now().UnixMilli())/1000)
}

// heartbeat writes the peer's card every second, stamped with its clock,
// until ctx ends.
func (p *skewedPeer) heartbeat(ctx context.Context, shared string, start time.Time) {
	dir := filepath.Join(shared, fleet.FolderName)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		c := fleet.Card{
			Name: p.name, Cluster: "default", URL: p.url, State: fleet.StateRunning, Release: "skewed",
			StartedAtMS: start.Add(p.skew).UnixMilli(), HeartbeatMS: time.Now().Add(p.skew).UnixMilli(),
			HeartbeatIntervalMS: 1000, CacheMarks: &fleet.Marks{Cluster: p.row.TSms}, Instance: "skewed-" + p.name,
		}
		b, _ := json.Marshal(c)
		// The worker on w1 creates the folder; written like a card: a temp
		// file renamed over it.
		tmp := filepath.Join(shared, "."+p.name+".tmp")
		if err := os.WriteFile(tmp, b, 0o600); err == nil {
			_ = os.Rename(tmp, filepath.Join(dir, p.name+".json"))
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// ServeHTTP serves the peer's one row at /api/v1/peer/cache/changes (a
// cursor past it: nothing more).
func (p *skewedPeer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/api/v1/peer/cache/changes" {
		http.NotFound(w, r)
		return
	}
	p.asked.Store(true)
	page := cache.WirePage{Rows: []cache.WireRow{}, Next: fmt.Sprintf("skewed-%d", p.row.TSms)}
	if r.URL.Query().Get("since") != page.Next {
		page.Rows = append(page.Rows, p.row)
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(page)
}
