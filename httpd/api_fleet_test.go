package httpd

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"svc/worker/cache"
	"svc/worker/config"
	"svc/worker/workertest/wait"
)

// withCache hands the test the handler cache the builder opened for cfg
// (cache.enabled; memory-only when cfg.Storage.Dir is empty).
func withCache(t *testing.T, store **cache.Store) func(*stack) {
	return func(s *stack) {
		if s.ui.cache == nil {
			t.Fatal("the builder opened no cache: set cache.enabled")
		}
		if store != nil {
			*store = s.ui.cache
		}
	}
}

// The peer route serves only with the cache on, a storage.dir and the
// exchange on; every other combination is 404, token or not.
func TestPeerRouteSwitches(t *testing.T) {
	t.Parallel()
	for _, cacheOn := range []bool{false, true} {
		for _, storage := range []bool{false, true} {
			for _, exchange := range []bool{false, true} {
				name := fmt.Sprintf("cache=%v storage=%v exchange=%v", cacheOn, storage, exchange)
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					cfg := testConfig(t, "/bin/cat")
					cfg.UI.AuthToken = "ui-secret-0123456789"
					cfg.Cache.Enabled = cacheOn
					cfg.Fleet.CacheExchange.Enabled = &exchange
					if storage {
						cfg.Storage.Dir = t.TempDir()
					}
					var tune []func(*stack)
					if cacheOn {
						tune = append(tune, withCache(t, nil))
					}
					s := startStack(t, cfg, tune...)
					want := 404
					if cacheOn && storage && exchange {
						want = 200
					}
					r := do(t, "GET", s.uiURL+"/api/v1/peer/cache/changes?scopes=cluster,global", "")
					if r.status != want {
						t.Fatalf("peer route = %d %s, want %d", r.status, r.body, want)
					}
					if want == 404 {
						var e ErrorBody
						if json.Unmarshal([]byte(r.body), &e) != nil || e.Error != "not_found" || e.Detail == "" {
							t.Errorf("404 body = %s", r.body)
						}
					}
				})
			}
		}
	}
}

func TestPeerRoutePagesAndRefusesBadQueries(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, "/bin/cat")
	cfg.Storage.Dir = t.TempDir()
	cfg.Cache.Enabled = true
	on := true
	cfg.Fleet.CacheExchange.Enabled = &on
	var store *cache.Store
	s := startStack(t, cfg, withCache(t, &store))
	ctx := context.Background()
	store.Put(ctx, cache.ScopeCluster, "c", []byte("1"))
	store.Put(ctx, cache.ScopeLocal, "l", []byte("2"))
	store.Put(ctx, cache.ScopeGlobal, "g", []byte{0xff, 0})

	var p cache.WirePage
	r := do(t, "GET", s.uiURL+"/api/v1/peer/cache/changes?limit=1", "")
	if r.status != 200 || json.Unmarshal([]byte(r.body), &p) != nil || len(p.Rows) != 1 || !p.More || p.Rows[0].Key != "c" || p.Rows[0].Origin != "test" {
		t.Fatalf("first page = %d %s", r.status, r.body)
	}
	r = do(t, "GET", s.uiURL+"/api/v1/peer/cache/changes?since="+p.Next, "")
	p = cache.WirePage{}
	if json.Unmarshal([]byte(r.body), &p) != nil || len(p.Rows) != 1 || p.More || p.Rows[0].Key != "g" ||
		p.Rows[0].ValueEncoding != "base64" || p.Rows[0].Value != "/wA=" {
		t.Fatalf("second page = %s, want the global row in base64 and no local row", r.body)
	}
	for _, q := range []string{"scopes=local", "scopes=cluster,global,cluster", "scopes=nope", "since=garbage", "limit=0", "limit=1001"} {
		if r := do(t, "GET", s.uiURL+"/api/v1/peer/cache/changes?"+q, ""); r.status != 400 {
			t.Errorf("?%s = %d %s, want 400", q, r.status, r.body)
		}
	}
}

func TestDebugCacheListsRowsBehindTheToken(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, "/bin/cat")
	cfg.UI.AuthToken = "ui-secret-0123456789"
	cfg.Cache.Enabled = true
	var store *cache.Store
	s := startStack(t, cfg, withCache(t, &store))
	ctx := context.Background()
	store.Put(ctx, cache.ScopeLocal, "fx:eur", []byte("1.08"))
	store.Put(ctx, cache.ScopeGlobal, "bin", []byte{0, 0xfe})
	auth := []string{"Authorization", "Bearer ui-secret-0123456789"}
	if r := do(t, "GET", s.uiURL+"/api/v1/debug/cache", ""); r.status != 401 {
		t.Errorf("without token = %d, want 401", r.status)
	}
	var l CacheListing
	r := do(t, "GET", s.uiURL+"/api/v1/debug/cache", "", auth...)
	if r.status != 200 || json.Unmarshal([]byte(r.body), &l) != nil {
		t.Fatalf("listing = %d %s", r.status, r.body)
	}
	if l.Rows != 2 || l.Persistent || len(l.Entries) != 2 || l.Entries[0].Key != "bin" || l.Entries[0].ValueEncoding != "base64" ||
		l.Entries[0].ValueSize != 2 || l.Entries[1].Value != "1.08" || l.Entries[1].Scope != "local" || l.Entries[1].TSms == 0 {
		t.Errorf("listing = %s", r.body)
	}
	r = do(t, "GET", s.uiURL+"/api/v1/debug/cache?prefix=fx:&scope=local", "", auth...)
	l = CacheListing{}
	if json.Unmarshal([]byte(r.body), &l) != nil || len(l.Entries) != 1 || l.Entries[0].Key != "fx:eur" {
		t.Errorf("filtered listing = %s", r.body)
	}
	if r := do(t, "GET", s.uiURL+"/api/v1/debug/cache?scope=fleet", "", auth...); r.status != 400 {
		t.Errorf("bad scope = %d, want 400", r.status)
	}
	off := startStack(t, testConfig(t, "/bin/cat"))
	if r := do(t, "GET", off.uiURL+"/api/v1/debug/cache", ""); r.status != 404 {
		t.Errorf("cache off = %d, want 404", r.status)
	}
}

func TestFleetWorkersRoute(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, "/bin/cat")
	cfg.Shared.Dir = t.TempDir()
	s := startStack(t, cfg)
	var l struct {
		Workers []map[string]any `json:"workers"`
	}
	r := do(t, "GET", s.uiURL+"/api/v1/fleet/workers", "")
	if r.status != 200 || json.Unmarshal([]byte(r.body), &l) != nil || len(l.Workers) != 1 {
		t.Fatalf("workers = %d %s", r.status, r.body)
	}
	w := l.Workers[0]
	for _, k := range []string{"name", "cluster", "url", "state", "release", "provider", "self", "started_at_ms", "heartbeat_ms", "cache_marks"} {
		if _, ok := w[k]; !ok {
			t.Errorf("worker entry lacks %q: %s", k, r.body)
		}
	}
	if w["name"] != "test" || w["self"] != true || w["url"] != s.uiURL {
		t.Errorf("self entry = %v", w)
	}
	// Without a shared folder (no shared.dir, no storage.dir) the
	// registry knows only this worker.
	r = do(t, "GET", startStack(t, testConfig(t, "/bin/cat")).uiURL+"/api/v1/fleet/workers", "")
	if l.Workers = nil; r.status != 200 || json.Unmarshal([]byte(r.body), &l) != nil || len(l.Workers) != 1 || l.Workers[0]["self"] != true {
		t.Errorf("without a shared folder = %d %s, want only this worker", r.status, r.body)
	}
}

// writeCard drops a live card into the card folder of shared as anyone
// who can write that folder could: its name and URL are the writer's
// choice.
func writeCard(t *testing.T, shared, name, url string) {
	t.Helper()
	dir := filepath.Join(shared, "fleet")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	card, _ := json.Marshal(map[string]any{
		"name": name, "cluster": "default", "url": url, "state": "running", "release": "v9.9.9",
		"started_at_ms": now.UnixMilli(), "heartbeat_ms": now.UnixMilli(),
		"heartbeat_interval_ms": time.Hour.Milliseconds(), // live for 3 h; a card stamped ahead is not believed "cache_marks": nil, "instance": "hostile",
	})
	if err := os.WriteFile(filepath.Join(dir, name+".json"), card, 0o600); err != nil {
		t.Fatal(err)
	}
}

// A card in the shared folder names whatever URL its writer likes: the
// workers list marks it untrusted and the pages' Content-Security-Policy
// leaves it out of connect-src, so no browser sends the UI token there,
// until the operator lists its origin in fleet.trusted_urls. Static peers
// (config the operator wrote) are trusted; a card that takes a static
// peer's name does not inherit that trust.
func TestHostileCardIsNotTrusted(t *testing.T) {
	t.Parallel()
	for _, listed := range []bool{false, true} {
		t.Run(fmt.Sprintf("listed in fleet.trusted_urls=%v", listed), func(t *testing.T) {
			t.Parallel()
			cfg := testConfig(t, "/bin/cat")
			cfg.UI.AuthToken = "ui-secret-0123456789"
			cfg.Shared.Dir = t.TempDir()
			cfg.Fleet.Registry.Peers = []config.Peer{
				{Name: "edge-1", Cluster: "default", URL: "http://edge-1.internal:8080"},
				{Name: "edge-2", Cluster: "default", URL: "http://edge-2.internal:8080"},
			}
			if listed {
				cfg.Fleet.TrustedURLs = []string{"HTTP://Evil.Example.com:9999/"}
			}
			writeCard(t, cfg.Shared.Dir, "evil", "http://evil.example.com:9999")
			writeCard(t, cfg.Shared.Dir, "evil-path", "http://evil.example.com:9999/<b>hi</b>")
			writeCard(t, cfg.Shared.Dir, "edge-1", "http://edge-1.attacker.example:8080")
			s := startStack(t, withSite(cfg))
			auth := []string{"Authorization", "Bearer ui-secret-0123456789"}

			var l struct {
				Workers []map[string]any `json:"workers"`
			}
			wait.For(t, wait.Long, "the hostile cards listed", func() (bool, string) {
				r := do(t, "GET", s.uiURL+"/api/v1/fleet/workers", "", auth...)
				l.Workers = nil
				return json.Unmarshal([]byte(r.body), &l) == nil && len(l.Workers) == 5, r.body
			})
			want := map[string]bool{"test": true, "edge-1": false, "edge-2": true, "evil": listed, "evil-path": listed}
			for _, w := range l.Workers {
				name, _ := w["name"].(string)
				got, ok := w["trusted"].(bool)
				if !ok || got != want[name] {
					t.Errorf("worker %s: trusted = %v (present %v), want %v: %v", name, w["trusted"], ok, want[name], w)
				}
			}

			r := do(t, "GET", s.uiURL+"/live", "", auth...)
			csp := r.header.Get("Content-Security-Policy")
			if r.status != 200 || csp == "" {
				t.Fatalf("GET /live = %d, CSP %q", r.status, csp)
			}
			if strings.Contains(csp, "attacker") {
				t.Errorf("CSP lets pages connect to the card that took edge-1's name: %s", csp)
			}
			if !strings.Contains(csp, " http://edge-2.internal:8080 ws://edge-2.internal:8080") {
				t.Errorf("CSP lacks the static peer edge-2: %s", csp)
			}
			if has := strings.Contains(csp, "evil.example.com"); has != listed {
				t.Errorf("CSP names evil.example.com = %v, want %v: %s", has, listed, csp)
			}
			if listed && strings.Count(csp, " http://evil.example.com:9999 ws://evil.example.com:9999") != 1 {
				t.Errorf("CSP lacks the trusted origin in its origin form, once: %s", csp)
			}
		})
	}
}
