package browsertest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"svc/worker/workertest"
	"svc/worker/workertest/wait"
)

// listener is a local HTTP server that records every request it gets
// (and answers 404): a stand-in for whatever a card in the shared folder
// points the Live page at.
type listener struct {
	*httptest.Server
	mu   sync.Mutex
	seen []string
}

func newListener(t *testing.T) *listener {
	l := &listener{}
	l.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l.mu.Lock()
		l.seen = append(l.seen, fmt.Sprintf("%s %s (Authorization %q)", r.Method, r.URL.RequestURI(), r.Header.Get("Authorization")))
		l.mu.Unlock()
		http.NotFound(w, r)
	}))
	t.Cleanup(l.Close)
	return l
}

func (l *listener) requests() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.seen...)
}

// fleetCard writes a live card into the card folder of shared, as anyone
// who can write that folder could.
func fleetCard(t *testing.T, shared, name, url string) {
	t.Helper()
	dir := filepath.Join(shared, "fleet")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	card, _ := json.Marshal(map[string]any{
		"name": name, "cluster": "default", "url": url, "state": "running", "release": "v9.9.9",
		"started_at_ms": now.UnixMilli(), "heartbeat_ms": now.UnixMilli(),
		"heartbeat_interval_ms": time.Hour.Milliseconds(), // live for 3 h; a card stamped ahead is not believed "cache_marks": nil, "instance": "card-" + name,
	})
	if err := os.WriteFile(filepath.Join(dir, name+".json"), card, 0o600); err != nil {
		t.Fatal(err)
	}
}

// testUntrustedCard runs a worker with a UI token whose shared folder holds
// three cards: one pointing at a listener whose origin fleet.trusted_urls
// lists, two at a listener it does not (one URL carrying markup). Live
// opens a socket with the token to the trusted one only; the other
// listener never hears from the browser, and the page lists both of its
// cards as not trusted, their names and URLs as text.
func testUntrustedCard(t *testing.T, b *browser, dir string) {
	trusted, hostile := newListener(t), newListener(t)
	root := t.TempDir()
	shared := filepath.Join(root, "shared")
	fleetCard(t, shared, "friend", trusted.URL)
	fleetCard(t, shared, "intruder", hostile.URL)
	markupURL := hostile.URL + `/<img src=x id=pwn>`
	fleetCard(t, shared, "markup", markupURL)
	port, in := workertest.FreePort(t), workertest.FreePort(t)
	cfg := workertest.WriteConfig(t, fmt.Sprintf(`
[worker]
name = "trust-1"
shutdown_timeout = "5s"
[metrics]
enabled = false
[ui]
port = %d
auth_token = %q
[ui.release]
cache_dir = %q
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
[fleet]
trusted_urls = [%q]
`, port, browserToken, filepath.Join(root, "ui-cache"), filepath.Join(root, "storage"), shared, in, trusted.URL))
	w := &uiWorker{base: fmt.Sprintf("http://127.0.0.1:%d", port), token: browserToken}
	w.proc = start(t, "run", "-config", cfg)
	w.proc.WaitHTTP(t, w.base+"/healthz")
	wait.For(t, wait.Long, "the cards listed", func() (bool, string) {
		_, body := w.get(t, "/api/v1/fleet/workers")
		return strings.Contains(body, `"friend"`) && strings.Contains(body, `"intruder"`) && strings.Contains(body, `"markup"`), body
	})

	p := b.newPage(t)
	p.navigate(w.base + "/live?token=" + browserToken)
	// The sockets of Live are opened together: once the trusted worker
	// got its handshake, an untrusted one would have got its own.
	wait.For(t, wait.Long, "the trusted worker's /ws handshake with the token", func() (bool, string) {
		for _, r := range trusted.requests() {
			if strings.HasPrefix(r, "GET /ws?token="+browserToken+" ") {
				return true, ""
			}
		}
		return false, strings.Join(trusted.requests(), "; ")
	})
	time.Sleep(500 * time.Millisecond)
	if got := hostile.requests(); len(got) != 0 {
		leaked := strings.Contains(strings.Join(got, " "), browserToken)
		t.Errorf("the untrusted card's listener got %d requests (token among them: %v): %q", len(got), leaked, got)
	}
	p.waitFor(`document.querySelector('[data-untrusted="intruder"]') && document.querySelector('[data-untrusted="markup"]')`, "the untrusted workers listed on Live")
	var got struct {
		Intruder, Markup, Friend string
		Pwned                    bool
	}
	jsonOf(t, p, `{ intruder: document.querySelector('[data-untrusted="intruder"]').textContent,
		markup: document.querySelector('[data-untrusted="markup"]').textContent,
		friend: document.querySelector('[data-untrusted="friend"]') ? "listed as untrusted" : "",
		pwned: !!document.querySelector("#pwn") }`, &got)
	for _, c := range []struct{ text, name, url string }{{got.Intruder, "intruder", hostile.URL}, {got.Markup, "markup", markupURL}} {
		for _, want := range []string{c.name, c.url, "not trusted"} {
			if !strings.Contains(c.text, want) {
				t.Errorf("untrusted entry %q lacks %q", c.text, want)
			}
		}
	}
	if got.Pwned {
		t.Error("the card's URL was rendered as markup")
	}
	if got.Friend != "" {
		t.Error("the worker in fleet.trusted_urls is listed as not trusted")
	}
	if s := p.text(); !strings.Contains(s, "fleet.trusted_urls") {
		t.Errorf("Live does not say how to trust a worker:\n%s", s)
	}
	var stray bool
	if err := p.eval(`/^(null|undefined|\[object \w+\])$/m.test(document.body.innerText)`, &stray); err != nil || stray {
		t.Errorf("page shows a stray null/undefined/[object] (eval error %v):\n%s", err, p.text())
	}
	// Not even an attempt the CSP refused: the page never tried.
	addr := strings.TrimPrefix(hostile.URL, "http://")
	for _, m := range p.messages() {
		if strings.Contains(m.Text, addr) || strings.Contains(m.URL, addr) {
			t.Errorf("console mentions the untrusted listener (%s): %s %s %s", addr, m.Level, m.Text, m.URL)
		}
	}
	p.screenshot(dir, "live-untrusted")
	if got := hostile.requests(); len(got) != 0 {
		t.Errorf("the untrusted card's listener got requests by the end: %q", got)
	}
}
