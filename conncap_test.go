package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"svc/worker/workertest"
)

// A flood of idle connections to the ingress cannot take the worker's
// file descriptors: with a file limit of 512, 1,200 connections that never
// send a byte leave the worker able to run the executor (pipes), write its
// fleet card and answer on its UI, and once they close the ingress serves
// an authenticated request. Without connection caps the ingress accepted
// until EMFILE and every other file operation failed with it.
func TestIdleConnectionFloodLeavesTheWorkerItsFiles(t *testing.T) {
	t.Parallel()
	const nofile, flood = 512, 1200
	const token = "flood-token-0123456789"
	shared, storage := t.TempDir(), t.TempDir()
	ui, in := freePort(t), freePort(t)
	cfg := workertest.WriteConfig(t, fmt.Sprintf(`
[worker]
name = "flooded"
[metrics]
enabled = false
[ui]
port = %d
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
[[sources.http.clients]]
name = "c"
token = %q
[fleet.registry]
heartbeat = "200ms"
`, ui, storage, shared, in, token))
	// Both limits, so Go's raise of the soft limit to the hard one at
	// start keeps it at nofile.
	p := workertest.Start(t, "/bin/sh", "-c", fmt.Sprintf("ulimit -n %d && exec %s run -config %s", nofile, svcBin, cfg))
	uiURL := fmt.Sprintf("http://127.0.0.1:%d", ui)
	p.WaitHTTP(t, uiURL+"/healthz")

	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	for range flood {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", in), 2*time.Second)
		if err != nil {
			t.Fatalf("dial %d: %v", len(conns), err)
		}
		conns = append(conns, c)
	}
	flooded := time.Now()
	time.Sleep(time.Second) // the accept loop takes what it will

	client := &http.Client{Timeout: 5 * time.Second} // within the 10 s before idle connections time out
	// The UI answers and the executor starts (pipes, a process).
	r, err := client.Post(uiURL+"/api/v1/debug/probe", "application/json", strings.NewReader(`{"payload":"still here"}`))
	if err != nil {
		t.Fatalf("probe during the flood: %v\n%s", err, p.Output.String())
	}
	b, _ := io.ReadAll(r.Body)
	r.Body.Close()
	if r.StatusCode != 200 || !strings.Contains(string(b), `"status":"ok"`) || !strings.Contains(string(b), "still here") {
		t.Fatalf("probe during the flood = %d %s\n%s", r.StatusCode, b, p.Output.String())
	}
	// The fleet card is still written every heartbeat.
	card := filepath.Join(shared, "fleet", "flooded.json")
	deadline := time.Now().Add(3 * time.Second)
	for {
		st, err := os.Stat(card)
		if err == nil && st.ModTime().After(flooded) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("fleet card not rewritten during the flood (%v)\n%s", err, p.Output.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, bad := range []string{"too many open files", "fleet_card_write_failed"} {
		if strings.Contains(p.Output.String(), bad) {
			t.Errorf("worker logged %q during the flood:\n%s", bad, p.Output.String())
		}
	}
	// nofile 512: 256 kept for the worker's own files, half the rest for
	// the ingress, a quarter for the UI.
	if out := p.Output.String(); !strings.Contains(out, `"msg":"connection_caps","nofile":512,"reserve":256,"ui":64,"ingress":128`) {
		t.Errorf("worker did not log its connection caps:\n%s", out)
	}
	if !strings.Contains(p.Output.String(), "connection_cap_reached") {
		t.Errorf("worker did not log connection_cap_reached:\n%s", p.Output.String())
	}

	// The idle connections go; their slots come back.
	for _, c := range conns {
		_ = c.Close()
	}
	conns = nil
	req, _ := http.NewRequest("POST", fmt.Sprintf("http://127.0.0.1:%d/v1/process", in), strings.NewReader("after the flood"))
	req.Header.Set("Authorization", "Bearer "+token)
	client.Timeout = 10 * time.Second
	r, err = client.Do(req)
	if err != nil {
		t.Fatalf("ingress after the flood: %v\n%s", err, p.Output.String())
	}
	b, _ = io.ReadAll(r.Body)
	r.Body.Close()
	if r.StatusCode != 200 || !strings.Contains(string(b), "after the flood") {
		t.Errorf("ingress after the flood = %d %s", r.StatusCode, b)
	}
}
