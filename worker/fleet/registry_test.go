package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"svc/worker/config"
	"svc/worker/workertest"
	"svc/worker/workertest/wait"
)

// status is a settable Status.
type status struct {
	ready, closing atomic.Bool
}

func (s *status) Ready() (bool, []string) { return s.ready.Load(), nil }
func (s *status) Closing() bool           { return s.closing.Load() }

type running struct {
	*Registry
	status *status
	logs   *workertest.Logs
	cancel context.CancelFunc
	done   chan struct{}
}

// stop ends Run and waits for it.
func (r *running) stop() {
	r.cancel()
	<-r.done
}

// run starts a filesystem registry named name on root.
func run(t *testing.T, root, name string, tune ...func(*Config)) *running {
	t.Helper()
	r := &running{status: &status{}, logs: &workertest.Logs{}, done: make(chan struct{})}
	r.status.ready.Store(true)
	cfg := Config{
		Worker: name, Cluster: "default", Release: "v1.2.3", StartedAt: time.Now(), Provider: ProviderFilesystem, Root: root,
		Heartbeat: 100 * time.Millisecond, Retention: time.Hour, Status: r.status, Logger: r.logs.Logger(),
		URL: func() string { return "http://" + name + ":8080" },
	}
	for _, f := range tune {
		f(&cfg)
	}
	r.Registry = New(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() {
		defer close(r.done)
		_ = r.Run(ctx)
	}()
	t.Cleanup(r.stop)
	return r
}

func states(ws []Worker) string {
	var out []string
	for _, w := range ws {
		s := w.Name + "=" + w.State
		if w.Self {
			s += "*"
		}
		out = append(out, s)
	}
	return strings.Join(out, " ")
}

func waitStates(t *testing.T, r *Registry, want string) {
	t.Helper()
	wait.For(t, wait.Long, "workers "+want, func() (bool, string) {
		got := states(r.Workers())
		return got == want, got
	})
}

func readCard(t *testing.T, root, name string) Card {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, FolderName, name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var c Card
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

// forge writes a card the way another process would (temp file, rename),
// with whatever fields it likes.
func forge(t *testing.T, root string, card map[string]any) {
	t.Helper()
	dir := filepath.Join(root, FolderName)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(card)
	if err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(dir, fmt.Sprintf(".forged-%d", time.Now().UnixNano()))
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, card["name"].(string)+".json")); err != nil {
		t.Fatal(err)
	}
}

// forged is a running card of name that this test, not a registry, wrote.
func forged(name, instance string, startedAt, heartbeat int64) map[string]any {
	return map[string]any{
		"name": name, "cluster": "default", "url": "http://forger:1", "state": StateRunning, "release": "evil",
		"started_at_ms": startedAt, "heartbeat_ms": heartbeat, "heartbeat_interval_ms": time.Hour.Milliseconds(), "instance": instance,
	}
}

func TestWorkersOnOneFolderSeeEachOther(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	a, b := run(t, root, "a"), run(t, root, "b")
	waitStates(t, a.Registry, "a=running* b=running")
	waitStates(t, b.Registry, "a=running b=running*")

	b.status.closing.Store(true)
	waitStates(t, a.Registry, "a=running* b=draining")
	b.stop()
	waitStates(t, a.Registry, "a=running* b=stopped")

	for _, p := range []string{FolderName, FolderName + "/a.json", FolderName + "/b.json"} {
		fi, err := os.Stat(filepath.Join(root, p))
		want := os.FileMode(0o600)
		if fi != nil && fi.IsDir() {
			want = 0o700
		}
		if err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v (%v), want %v", p, fi.Mode(), err, want)
		}
	}
	w := a.Workers()[1]
	if w.URL != "http://b:8080" || w.Release != "v1.2.3" || w.Provider != ProviderFilesystem || w.HeartbeatMS == 0 || w.StartedAtMS == 0 {
		t.Errorf("b as listed = %+v", w)
	}
	if ps := a.Peers(); len(ps) != 0 {
		t.Errorf("Peers with b stopped = %+v, want none", ps)
	}
}

func TestStartingUntilFirstReady(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	a := run(t, root, "a")
	bStatus := &status{}
	run(t, root, "b", func(c *Config) { c.Status = bStatus })
	waitStates(t, a.Registry, "a=running* b=starting")
	bStatus.ready.Store(true)
	waitStates(t, a.Registry, "a=running* b=running")
	bStatus.ready.Store(false) // e.g. a rebalance: still running
	time.Sleep(300 * time.Millisecond)
	if got := states(a.Workers()); got != "a=running* b=running" {
		t.Errorf("after losing readiness = %s, want b still running", got)
	}
}

// A card whose owner stopped heartbeating turns unreachable for readers,
// and any worker removes it once past the retention.
func TestStaleCardsTurnUnreachableThenGo(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	var shift atomic.Int64
	a := run(t, root, "a", func(c *Config) {
		c.Now = func() time.Time { return time.Now().Add(time.Duration(shift.Load())) }
	})
	waitStates(t, a.Registry, "a=running*")
	ghost := Card{Name: "ghost", Cluster: "default", URL: "http://ghost:1", State: StateRunning, StartedAtMS: 1,
		HeartbeatMS: time.Now().UnixMilli(), HeartbeatIntervalMS: 1000, Instance: "x"}
	b, _ := json.Marshal(ghost)
	os.WriteFile(filepath.Join(root, FolderName, "ghost.json"), b, 0o600)
	tmp := filepath.Join(root, FolderName, ".ghost.json.tmp-0011")
	os.WriteFile(tmp, nil, 0o600)
	old := time.Now().Add(-2 * time.Hour)
	os.Chtimes(tmp, old, old)

	waitStates(t, a.Registry, "a=running* ghost=running")
	shift.Store(int64(2 * time.Second)) // 2 missed intervals: still running
	time.Sleep(150 * time.Millisecond)
	if got := states(a.Workers()); got != "a=running* ghost=running" {
		t.Errorf("ghost 2 beats late = %s", got)
	}
	shift.Store(int64(4 * time.Second))
	waitStates(t, a.Registry, "a=running* ghost=unreachable")
	if ps := a.Peers(); len(ps) != 0 {
		t.Errorf("an unreachable card is a peer: %+v", ps)
	}
	shift.Store(int64(2 * time.Hour))
	waitStates(t, a.Registry, "a=running*")
	if _, err := os.Stat(tmp); !os.IsNotExist(err) {
		t.Error("an old temp file was left in the card folder")
	}
	if len(a.logs.Named("fleet_card_removed")) != 2 {
		t.Errorf("removal logs: %s", a.logs.String())
	}
}

// The second process of one name logs the conflict and leaves the live
// card of the first alone; it takes the card over once the first stopped.
func TestSecondWorkerOfOneNameYields(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	// Heartbeats of a second: a loaded machine must not make the first
	// look unreachable.
	slow := func(c *Config) { c.Heartbeat = time.Second }
	first := run(t, root, "twin", slow, func(c *Config) {
		c.URL = func() string { return "http://first:1" }
		c.proc = proc{host: "first-host", pid: 1} // not provably gone: another host
	})
	wait.For(t, wait.Long, "the first card", func() (bool, string) {
		_, err := os.Stat(filepath.Join(root, FolderName, "twin.json"))
		return err == nil, fmt.Sprint(err)
	})
	second := run(t, root, "twin", slow, func(c *Config) { c.URL = func() string { return "http://second:1" } })
	wait.For(t, wait.Long, "the conflict log", func() (bool, string) { return len(second.logs.Named("fleet_name_conflict")) == 1, "" })
	log := second.logs.Named("fleet_name_conflict")[0]
	if log["other_url"] != "http://first:1" || log["worker"] != "twin" || log["level"] != "ERROR" {
		t.Errorf("conflict log = %v", log)
	}
	time.Sleep(1500 * time.Millisecond) // a heartbeat of the second
	if c := readCard(t, root, "twin"); c.URL != "http://first:1" {
		t.Fatalf("card = %+v, want the first's", c)
	}
	if len(second.logs.Named("fleet_name_conflict")) != 1 {
		t.Error("the conflict is logged on every heartbeat")
	}
	first.stop()
	wait.For(t, wait.Long, "the second to take over", func() (bool, string) {
		c := readCard(t, root, "twin")
		return c.URL == "http://second:1", "card URL " + c.URL
	})
	if len(second.logs.Named("fleet_card_taken_over")) != 1 {
		t.Errorf("logs: %s", second.logs.String())
	}
}

func TestStaticPeersAndContact(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	peers := []config.Peer{
		{Name: "s1", Cluster: "edge", URL: "http://s1:8080"},
		{Name: "b", Cluster: "default", URL: "http://static-b:8080"},
	}
	a := run(t, root, "a", func(c *Config) { c.Peers = peers })
	waitStates(t, a.Registry, "a=running* b=unknown s1=unknown")
	a.Contacted("s1", true)
	a.Contacted("b", false)
	waitStates(t, a.Registry, "a=running* b=unreachable s1=running")
	if ws := a.Workers(); ws[2].Provider != ProviderStatic || ws[2].CacheMarks != nil || ws[2].URL != "http://s1:8080" {
		t.Errorf("static peer = %+v", ws[2])
	}
	run(t, root, "b")
	waitStates(t, a.Registry, "a=running* b=running s1=running") // the card replaces the static entry
	ps := a.Peers()
	if len(ps) != 2 || ps[0].Name != "b" || ps[0].Static || ps[1].Name != "s1" || !ps[1].Static {
		t.Errorf("Peers = %+v, want card b, then static s1", ps)
	}
}

func TestStaticProviderWritesNoCard(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	a := run(t, root, "a", func(c *Config) {
		c.Provider = ProviderStatic
		c.Peers = []config.Peer{{Name: "p", Cluster: "default", URL: "http://p:1"}}
	})
	waitStates(t, a.Registry, "a=running* p=unknown")
	if _, err := os.Stat(filepath.Join(root, FolderName)); !os.IsNotExist(err) {
		t.Error("the static provider made a card folder")
	}
}

func TestMarksMoveTheCard(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	var mu sync.Mutex
	marks := &Marks{}
	run(t, root, "a", func(c *Config) {
		c.Heartbeat = time.Hour
		c.Marks = func() *Marks { mu.Lock(); defer mu.Unlock(); m := *marks; return &m }
	})
	wait.For(t, wait.Long, "the card", func() (bool, string) {
		_, err := os.Stat(filepath.Join(root, FolderName, "a.json"))
		return err == nil, fmt.Sprint(err)
	})
	mu.Lock()
	marks.Global = 42
	mu.Unlock()
	wait.For(t, wait.Long, "the marks on the card", func() (bool, string) {
		c := readCard(t, root, "a")
		return c.CacheMarks != nil && c.CacheMarks.Global == 42, fmt.Sprintf("cache marks %+v", c.CacheMarks)
	})
}

// Trust follows the origin a card names, never its name: a card is
// trusted when its URL's origin is this worker's, a static peer's or in
// fleet.trusted_urls; only trusted origins become connect sources.
func TestTrustFollowsTheOrigin(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	a := run(t, root, "a", func(c *Config) {
		c.Peers = []config.Peer{{Name: "s1", Cluster: "default", URL: "http://s1:8080"}}
		c.Trusted = []string{"HTTPS://W2.Example.com:443/"}
	})
	waitStates(t, a.Registry, "a=running* s1=unknown")
	dir := filepath.Join(root, FolderName)
	card := func(name, url string) {
		b, _ := json.Marshal(Card{Name: name, Cluster: "default", URL: url, State: StateRunning,
			HeartbeatMS: time.Now().UnixMilli(), HeartbeatIntervalMS: time.Hour.Milliseconds(), Instance: "i-" + name})
		if err := os.WriteFile(filepath.Join(dir, name+".json"), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	card("w2", "https://w2.example.com/ui")       // listed origin, another form
	card("w2b", "https://w2.example.com:443")     // the same origin again
	card("s1", "http://s1.attacker.example:8080") // a static peer's name, another origin
	card("echo", "http://a:8080/elsewhere")       // this worker's own origin
	card("evil", "http://evil.example.com:8080")  // nobody listed it
	card("port", "https://w2.example.com:8443")   // a listed host on another port
	card("plain", "http://w2.example.com")        // a listed host under another scheme
	card("nourl", "")                             // nothing to trust
	waitStates(t, a.Registry, "a=running* echo=running evil=running nourl=running plain=running port=running s1=running w2=running w2b=running")
	var got []string
	for _, w := range a.Workers() {
		if w.Trusted {
			got = append(got, w.Name)
		}
	}
	if s := strings.Join(got, " "); s != "a echo w2 w2b" {
		t.Errorf("trusted workers = %s, want a echo w2 w2b", s)
	}
	if o := strings.Join(a.TrustedOrigins(), " "); o != "http://a:8080 https://w2.example.com" {
		t.Errorf("TrustedOrigins = %s, want the echo card's (this worker's own origin) and w2's once", o)
	}
}

// Whatever other processes leave in the folder, readers skip what is not
// a card and never follow a link out of it.
func TestHostileCardFolder(t *testing.T) {
	t.Parallel()
	root, outside := t.TempDir(), t.TempDir()
	a := run(t, root, "a")
	waitStates(t, a.Registry, "a=running*")
	dir := filepath.Join(root, FolderName)
	good := func(name string) []byte {
		b, _ := json.Marshal(Card{Name: name, Cluster: "default", URL: "javascript:alert(1)", State: StateRunning,
			HeartbeatMS: time.Now().UnixMilli(), HeartbeatIntervalMS: time.Hour.Milliseconds(), Instance: "i", Release: "v\x1b[31m1"})
		return b
	}
	os.WriteFile(filepath.Join(outside, "evil.json"), good("evil"), 0o600)
	os.Symlink(filepath.Join(outside, "evil.json"), filepath.Join(dir, "evil.json"))
	os.WriteFile(filepath.Join(outside, "hard.json"), good("hard"), 0o600)
	os.Link(filepath.Join(outside, "hard.json"), filepath.Join(dir, "hard.json"))
	os.WriteFile(filepath.Join(dir, "big.json"), append(good("big"), make([]byte, maxCardBytes)...), 0o600)
	os.WriteFile(filepath.Join(dir, "liar.json"), good("other"), 0o600)
	os.WriteFile(filepath.Join(dir, "junk.json"), []byte("{not json"), 0o600)
	os.Mkdir(filepath.Join(dir, "dir.json"), 0o700)
	os.WriteFile(filepath.Join(dir, "link.json"), good("link"), 0o600)
	time.Sleep(200 * time.Millisecond)
	ws := a.Workers()
	if got := states(ws); got != "a=running* link=running" {
		t.Fatalf("workers = %s, want only a and the plain card", got)
	}
	if ws[1].URL != "" || ws[1].Release != "v[31m1" {
		t.Errorf("link as listed = %+v, want no URL and a printable release", ws[1])
	}
	if len(a.Peers()) != 0 {
		t.Error("a card without a link URL is a peer")
	}
}

func TestSymlinkedCardFolderIsRefused(t *testing.T) {
	t.Parallel()
	root, outside := t.TempDir(), t.TempDir()
	os.Symlink(outside, filepath.Join(root, FolderName))
	a := run(t, root, "a")
	waitStates(t, a.Registry, "a=running*")
	wait.For(t, wait.Long, "the folder warning", func() (bool, string) { return len(a.logs.Named("fleet_card_folder_unavailable")) == 1, "" })
	if m, _ := filepath.Glob(filepath.Join(outside, "*")); len(m) != 0 {
		t.Errorf("wrote through the symlink: %v", m)
	}
}

func TestCardURL(t *testing.T) {
	t.Parallel()
	cases := []struct{ public, bind, want string }{
		{"", "127.0.0.1:8080", "http://127.0.0.1:8080"},
		{"", "0.0.0.0:8080", "http://host-1:8080"},
		{"", "[::]:8080", "http://host-1:8080"},
		{"", "[fd00::1]:8080", "http://[fd00::1]:8080"},
		{"https://w1.example/svc", "0.0.0.0:8080", "https://w1.example/svc"},
		{"https://user:pw@w1.example/?token=s3cret#frag", "x", "https://w1.example/"},
	}
	for _, c := range cases {
		if got := CardURL(c.public, c.bind, "host-1"); got != c.want {
			t.Errorf("CardURL(%q, %q) = %q, want %q", c.public, c.bind, got, c.want)
		}
	}
	for _, bad := range []string{"javascript:alert(1)", "file:///etc/passwd", "http://", "http://u@h", "http://h/?q", "//h", "ftp://h", "http://h#x", strings.Repeat("h", 3000)} {
		if got := LinkURL(bad); got != "" {
			t.Errorf("LinkURL(%q) = %q, want \"\"", bad, got)
		}
	}
	if got := LinkURL(fmt.Sprintf("https://h:%d/p", 443)); got == "" {
		t.Error("LinkURL refused a plain https URL")
	}
}
