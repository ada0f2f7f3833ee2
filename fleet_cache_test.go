package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"svc/worker/workertest"
	"svc/worker/workertest/wait"
)

// cacheExecutor stores "<scope> <key> <value>" (its stdin) as a cache
// row through fd 3.
const cacheExecutor = `#!/bin/sh
IFS=' ' read -r scope key value
printf '{"cache":{"key":"%s","value":"%s","scope":"%s"}}\n' "$key" "$value" "$scope" >&3
printf ok`

// member is one `svc run` process of a test fleet.
type member struct {
	name, cluster string
	ui, in        int
	storage       string
	proc          *workertest.Proc
}

func (m *member) url(path string) string { return fmt.Sprintf("http://127.0.0.1:%d%s", m.ui, path) }

// startMember runs an HTTP-only worker with the cache on, on shared, with
// short heartbeat and exchange intervals; extra is appended to its config.
func startMember(t *testing.T, name, cluster, shared, extra string) *member {
	t.Helper()
	exe := filepath.Join(t.TempDir(), "cache.sh")
	if err := os.WriteFile(exe, []byte(cacheExecutor), 0o755); err != nil {
		t.Fatal(err)
	}
	m := &member{name: name, cluster: cluster, ui: freePort(t), in: freePort(t), storage: filepath.Join(t.TempDir(), name)}
	cfg := workertest.WriteConfig(t, fmt.Sprintf(`
[worker]
name = %q
cluster = %q
shutdown_timeout = "5s"
[metrics]
enabled = false
[ui]
port = %d
[storage]
dir = %q
[shared]
dir = %q
[executor]
binary_path = %q
[sources.http]
enabled = true
host = "127.0.0.1"
port = %d
[cache]
enabled = true
[fleet.registry]
heartbeat = "1s"
[fleet.cache_exchange]
interval = "500ms"
timeout = "5s"
%s`, name, cluster, m.ui, m.storage, shared, exe, m.in, extra))
	m.proc = start(t, "run", "-config", cfg)
	m.proc.WaitHTTP(t, m.url("/healthz"))
	return m
}

// write makes m's executor write one cache row.
func (m *member) write(t *testing.T, scope, key, value string) {
	t.Helper()
	r, err := http.Post(fmt.Sprintf("http://127.0.0.1:%d/v1/process", m.in), "text/plain", strings.NewReader(scope+" "+key+" "+value))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(r.Body)
	r.Body.Close()
	if r.StatusCode != 200 {
		t.Fatalf("%s: write %s = %d %s", m.name, key, r.StatusCode, b)
	}
}

type cacheRow struct {
	Key, Value, Scope, Origin string
	TSms                      int64 `json:"ts_ms"`
}

// row returns m's row of key in scope, if any.
func (m *member) row(t *testing.T, scope, key string) (cacheRow, bool) {
	t.Helper()
	var l struct {
		Rows []cacheRow `json:"rows"`
	}
	getJSON(t, m.url("/api/v1/debug/cache?scope="+scope+"&prefix="+key), &l)
	for _, r := range l.Rows {
		if r.Key == key {
			return r, true
		}
	}
	return cacheRow{}, false
}

// workers returns "name=state" of m's workers list, sorted.
func (m *member) workers(t *testing.T) string {
	t.Helper()
	var l struct {
		Workers []struct {
			Name, State string
		} `json:"workers"`
	}
	getJSON(t, m.url("/api/v1/fleet/workers"), &l)
	var out []string
	for _, w := range l.Workers {
		out = append(out, w.Name+"="+w.State)
	}
	return strings.Join(out, " ")
}

func (m *member) waitWorkers(t *testing.T, want string) {
	t.Helper()
	wait.For(t, wait.Long, m.name+" to list "+want, func() (bool, string) {
		got := m.workers(t)
		return got == want, got
	})
}

// cycles reads m's completed exchange cycles.
func (m *member) cycles(t *testing.T) float64 {
	t.Helper()
	var d struct {
		Families []struct {
			Name    string
			Samples []struct{ Value float64 }
		}
	}
	getJSON(t, m.url("/api/v1/debug/metrics"), &d)
	for _, f := range d.Families {
		if f.Name == "svc_cache_exchange_cycles_total" && len(f.Samples) == 1 {
			return f.Samples[0].Value
		}
	}
	return 0
}

// Three workers on one shared folder list each other; a SIGKILLed one
// turns unreachable, a stopped one stopped.
func TestThreeWorkersListEachOther(t *testing.T) {
	if testing.Short() {
		t.Skip("three worker processes")
	}
	t.Parallel()
	shared := t.TempDir()
	a := startMember(t, "a", "default", shared, "")
	b := startMember(t, "b", "default", shared, "")
	c := startMember(t, "c", "default", shared, "")
	for _, m := range []*member{a, b, c} {
		m.waitWorkers(t, "a=running b=running c=running")
	}
	_ = b.proc.Cmd.Process.Kill()
	b.proc.Wait(t)
	_ = c.proc.Cmd.Process.Signal(syscall.SIGTERM)
	if code := c.proc.Wait(t); code != 0 {
		t.Errorf("c exit = %d\n%s", code, c.proc.Output.String())
	}
	a.waitWorkers(t, "a=running b=unreachable c=stopped")
	// Each card carries its worker's load (an HTTP-only worker: no
	// partitions, no lag); a stopped card none.
	var l struct {
		Workers []struct {
			Name           string
			HeartbeatAgeMS *int64 `json:"heartbeat_age_ms"`
			Load           *struct {
				Partitions *int64 `json:"partitions"`
				Lag        *int64 `json:"lag"`
				PoolSize   int64  `json:"pool_size"`
				Intake     string `json:"intake"`
			} `json:"load"`
		} `json:"workers"`
	}
	getJSON(t, a.url("/api/v1/fleet/workers"), &l)
	for _, w := range l.Workers {
		switch {
		case w.HeartbeatAgeMS == nil:
			t.Errorf("%s listed without a heartbeat age", w.Name)
		case w.Name == "c" && w.Load != nil:
			t.Errorf("stopped c listed with a load: %+v", *w.Load)
		case w.Name != "c" && (w.Load == nil || w.Load.Intake != "http_only" || w.Load.PoolSize < 1 || w.Load.Partitions != nil || w.Load.Lag != nil):
			t.Errorf("%s listed with load %+v, want an HTTP-only worker's", w.Name, w.Load)
		}
	}
	fi, err := os.Stat(filepath.Join(shared, "fleet", "a.json"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("card mode = %v (%v), want 0600", fi, err)
	}
}

// Rows written by one worker's executor reach the others: global rows
// everywhere, cluster rows within the cluster, local rows nowhere; a
// conflicting write ends the same on every worker.
func TestThreeWorkersConvergeACache(t *testing.T) {
	if testing.Short() {
		t.Skip("three worker processes")
	}
	t.Parallel()
	shared := t.TempDir()
	a := startMember(t, "a", "eu", shared, "")
	b := startMember(t, "b", "eu", shared, "")
	c := startMember(t, "c", "us", shared, "")
	for _, m := range []*member{a, b, c} {
		m.waitWorkers(t, "a=running b=running c=running")
	}

	// Counted in exchange cycles of the receivers, rows arrive within 3.
	start := map[string]float64{"b": b.cycles(t), "c": c.cycles(t)}
	a.write(t, "global", "g1", "hello")
	a.write(t, "cluster", "c1", "eu-only")
	a.write(t, "local", "l1", "mine")
	for _, m := range []*member{b, c} {
		wait.For(t, wait.Long, m.name+" to hold g1", func() (bool, string) {
			r, ok := m.row(t, "global", "g1")
			return ok && r.Value == "hello" && r.Origin == "a", fmt.Sprintf("row %+v (found %v)", r, ok)
		})
		n := m.cycles(t) - start[m.name]
		t.Logf("%s held g1 after %v exchange cycles", m.name, n)
		if n > 3+1 { // +1: a cycle may complete between the row's arrival and this read
			t.Errorf("%s got g1 after %v exchange cycles, want at most 3", m.name, n)
		}
	}
	wait.For(t, wait.Long, "b to hold c1", func() (bool, string) { _, ok := b.row(t, "cluster", "c1"); return ok, "" })
	// c has pulled a since c1 was written (it holds a later row), yet
	// neither the cluster row nor the local one.
	a.write(t, "global", "g2", "after")
	wait.For(t, wait.Long, "c to hold g2", func() (bool, string) { _, ok := c.row(t, "global", "g2"); return ok, "" })
	wait.For(t, wait.Long, "b to hold g2", func() (bool, string) { _, ok := b.row(t, "global", "g2"); return ok, "" })
	if _, ok := c.row(t, "cluster", "c1"); ok {
		t.Error("a cluster row crossed to another cluster")
	}
	for _, m := range []*member{b, c} {
		if _, ok := m.row(t, "local", "l1"); ok {
			t.Errorf("a local row reached %s", m.name)
		}
	}

	// A conflict: each writes the same key; all end on one row.
	for _, m := range []*member{a, b, c} {
		m.write(t, "global", "conflict", "from-"+m.name)
	}
	var final cacheRow
	wait.For(t, wait.Long, "one winner everywhere", func() (bool, string) {
		var seen []string
		rows := map[cacheRow]bool{}
		for _, m := range []*member{a, b, c} {
			r, _ := m.row(t, "global", "conflict")
			rows[r] = true
			final = r
			seen = append(seen, m.name+":"+r.Value)
		}
		return len(rows) == 1, strings.Join(seen, " ")
	})
	if final.Value != "from-"+final.Origin {
		t.Errorf("winner = %+v, its value is not its origin's", final)
	}
	for _, m := range []*member{a, b, c} {
		if !strings.Contains(m.proc.Output.String(), `"msg":"worker_started"`) || strings.Contains(m.proc.Output.String(), "cache_exchange_peer_failed") {
			t.Errorf("%s logs:\n%s", m.name, workertest.Tail(m.proc.Output.String(), 20))
		}
	}
}

// The second worker of one name logs the conflict and leaves the first's
// live card alone.
func TestSecondWorkerOfOneNameKeepsOffTheCard(t *testing.T) {
	if testing.Short() {
		t.Skip("two worker processes")
	}
	t.Parallel()
	shared := t.TempDir()
	first := startMember(t, "twin", "default", shared, "")
	first.waitWorkers(t, "twin=running")
	second := startMember(t, "twin", "default", shared, "")
	wait.For(t, wait.Long, "the conflict log", func() (bool, string) { return strings.Contains(second.proc.Output.String(), "fleet_name_conflict"), "" })
	if !strings.Contains(second.proc.Output.String(), `"level":"ERROR"`) {
		t.Errorf("conflict not logged as an error:\n%s", second.proc.Output.String())
	}
	b, _ := os.ReadFile(filepath.Join(shared, "fleet", "twin.json"))
	if !strings.Contains(string(b), fmt.Sprintf(":%d", first.ui)) {
		t.Errorf("card = %s, want the first worker's (UI port %d)", b, first.ui)
	}
}

// A card written with a config full of secrets holds none of them.
func TestCardHoldsNoSecrets(t *testing.T) {
	t.Parallel()
	shared := t.TempDir()
	startMember(t, "secretive", "default", shared, `
[executor.env]
API_TOKEN = "s3cret-env"
[[sources.http.clients]]
name = "c"
token = "s3cret-client-0123456789"
[sources.kafka.security]
password = "s3cret-kafka"
`)
	// A second config: the UI token and a public URL with credentials.
	ui := freePort(t)
	cfg := workertest.WriteConfig(t, fmt.Sprintf(`
[worker]
name = "secretive2"
[metrics]
enabled = false
[ui]
port = %d
auth_token = "s3cret-ui-0123456789"
public_url = "https://user:s3cret-pw@w2.example/?token=s3cret-q#s3cret-f"
[storage]
dir = %q
[shared]
dir = %q
[executor]
binary_path = "/bin/cat"
[sources.http]
enabled = true
host = "127.0.0.1"
port = %d
[fleet.registry]
heartbeat = "200ms"
`, ui, t.TempDir(), shared, freePort(t)))
	start(t, "run", "-config", cfg)
	wait.For(t, wait.Long, "both cards", func() (bool, string) {
		m, _ := filepath.Glob(filepath.Join(shared, "fleet", "*.json"))
		return len(m) == 2, fmt.Sprint("cards ", m)
	})
	cards, _ := filepath.Glob(filepath.Join(shared, "fleet", "*.json"))
	for _, f := range cards {
		b, _ := os.ReadFile(f)
		if strings.Contains(string(b), "s3cret") {
			t.Errorf("%s holds a secret: %s", f, b)
		}
		var card map[string]any
		if json.Unmarshal(b, &card) != nil {
			t.Errorf("%s is not JSON: %s", f, b)
		}
		if strings.HasSuffix(f, "secretive2.json") && card["url"] != "https://w2.example/" {
			t.Errorf("card url = %v, want the public URL without credentials", card["url"])
		}
	}
}

// A worker restarted after SIGKILL finds its previous instance's card
// still live, recognises that instance as its own dead process (this
// host, a pid that is gone) and takes the card over at once: no
// fleet_name_conflict, no wait for the card to turn unreachable.
func TestWorkerRestartedAfterSIGKILLTakesItsCardAtOnce(t *testing.T) {
	t.Parallel()
	storage, shared := t.TempDir(), t.TempDir()
	ui, in := freePort(t), freePort(t)
	cfg := workerConfig(t, "phoenix", storage, shared, ui, in)
	card := filepath.Join(shared, "fleet", "phoenix.json")
	p := start(t, "run", "-config", cfg)
	p.WaitHTTP(t, fmt.Sprintf("http://127.0.0.1:%d/healthz", ui))
	wait.For(t, wait.Long, "the first card", func() (bool, string) {
		b, _ := os.ReadFile(card)
		return strings.Contains(string(b), `"state":"running"`), string(b)
	})
	_ = p.Cmd.Process.Kill()
	p.Wait(t)

	p2 := start(t, "run", "-config", cfg)
	p2.WaitHTTP(t, fmt.Sprintf("http://127.0.0.1:%d/healthz", ui))
	wait.For(t, wait.Long, "the take-over log", func() (bool, string) {
		return strings.Contains(p2.Output.String(), "previous_instance_dead"), workertest.Tail(p2.Output.String(), 5)
	})
	if strings.Contains(p2.Output.String(), "fleet_name_conflict") {
		t.Errorf("the restart logged a name conflict:\n%s", p2.Output.String())
	}
	// The card is rewritten at the next heartbeat after the take-over.
	wait.For(t, wait.Long, "the card of the restarted process", func() (bool, string) {
		var c struct {
			PID int `json:"pid"`
		}
		b, _ := os.ReadFile(card)
		return json.Unmarshal(b, &c) == nil && c.PID == p2.Cmd.Process.Pid, fmt.Sprintf("card %s, want pid %d", b, p2.Cmd.Process.Pid)
	})
}
