package browsertest

// A small Chrome DevTools Protocol client for the browser tests: it starts
// headless Chromium, opens tabs over one browser-level WebSocket (flat
// sessions) and offers what the tests need: navigate, evaluate, wait for
// a condition, click, type, screenshot, and the console messages a page
// logged. Only x/net/websocket, no new module.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/websocket"
)

// cdpWait bounds every wait for a page condition; a slow machine only
// makes the waits longer, never a failure short of this.
const cdpWait = 45 * time.Second

// findChromium returns the browser to drive, or "" when there is none.
func findChromium() string {
	if p := os.Getenv("SVC_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

type cdpMsg struct {
	ID        int64           `json:"id,omitempty"`
	Method    string          `json:"method,omitempty"`
	Params    json.RawMessage `json:"params,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
	Error     *cdpError       `json:"error,omitempty"`
	SessionID string          `json:"sessionId,omitempty"`
}

type cdpError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// browser is one headless Chromium process and its DevTools socket.
type browser struct {
	cmd  *exec.Cmd
	conn *websocket.Conn
	done chan struct{}

	mu       sync.Mutex
	next     int64
	pending  map[int64]chan cdpMsg
	sessions map[string]*page
}

// startBrowser launches Chromium with a fresh profile; it is killed when
// the test ends.
func startBrowser(t *testing.T, bin string) *browser {
	t.Helper()
	cmd := exec.Command(bin, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-extensions",
		"--disable-dev-shm-usage", "--remote-allow-origins=*", "--remote-debugging-port=0", "--window-size=1280,800",
		"--lang=en-US", "--user-data-dir="+t.TempDir(), "about:blank")
	// Its own process group, so the renderer and GPU children die with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	b := &browser{cmd: cmd, done: make(chan struct{}), pending: map[int64]chan cdpMsg{}, sessions: map[string]*page{}}
	t.Cleanup(func() {
		if b.conn != nil {
			b.conn.Close()
		}
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if _, url, ok := strings.Cut(sc.Text(), "DevTools listening on "); ok {
				found <- strings.TrimSpace(url)
			}
		}
	}()
	var url string
	select {
	case url = <-found:
	case <-time.After(cdpWait):
		t.Fatal("chromium did not print its DevTools address")
	}
	cfg, err := websocket.NewConfig(url, "http://127.0.0.1/")
	if err != nil {
		t.Fatal(err)
	}
	if b.conn, err = websocket.DialConfig(cfg); err != nil {
		t.Fatalf("connect to chromium: %v", err)
	}
	b.conn.MaxPayloadBytes = 64 << 20
	go b.read()
	return b
}

func (b *browser) read() {
	defer close(b.done)
	for {
		var m cdpMsg
		if err := websocket.JSON.Receive(b.conn, &m); err != nil {
			b.mu.Lock()
			for id, ch := range b.pending {
				ch <- cdpMsg{ID: id, Error: &cdpError{Message: "browser connection closed: " + err.Error()}}
				delete(b.pending, id)
			}
			b.mu.Unlock()
			return
		}
		b.mu.Lock()
		if m.ID != 0 {
			if ch, ok := b.pending[m.ID]; ok {
				ch <- m
				delete(b.pending, m.ID)
			}
		} else if p := b.sessions[m.SessionID]; p != nil {
			p.event(m)
		}
		b.mu.Unlock()
	}
}

// call sends one command (in a session when session is set) and decodes
// its result into out.
func (b *browser) call(session, method string, params, out any) error {
	ch := make(chan cdpMsg, 1)
	b.mu.Lock()
	b.next++
	id := b.next
	b.pending[id] = ch
	b.mu.Unlock()
	raw, _ := json.Marshal(params)
	if params == nil {
		raw = []byte("{}")
	}
	if err := websocket.JSON.Send(b.conn, cdpMsg{ID: id, Method: method, Params: raw, SessionID: session}); err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	select {
	case m := <-ch:
		if m.Error != nil {
			return fmt.Errorf("%s: %s", method, m.Error.Message)
		}
		if out != nil {
			return json.Unmarshal(m.Result, out)
		}
		return nil
	case <-time.After(cdpWait):
		return fmt.Errorf("%s: no answer within %s", method, cdpWait)
	}
}

// chromiumOrSkip is the start of every browser test: skipped in -short
// runs and, without Chromium, skipped (a failure when CI is set); it
// returns the Chromium binary.
func chromiumOrSkip(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("browser tests are end-to-end: skipped with -short")
	}
	bin := findChromium()
	if bin == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("CI is set but no Chromium was found (.ci/run installs Debian's chromium; or set SVC_CHROMIUM)")
		}
		t.Skip("no Chromium found: install it (apt-get install chromium) or set SVC_CHROMIUM to run the browser tests")
	}
	return bin
}

// openWithToken opens url (a worker's UI address and path) in a new page
// of b, signed in with browserToken as a query parameter.
func openWithToken(t *testing.T, b *browser, url string) *page {
	p := b.newPage(t)
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	p.navigate(url + sep + "token=" + browserToken)
	return p
}
