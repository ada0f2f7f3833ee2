package httpd

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"svc/worker/config"
	"svc/worker/workertest"
	"svc/worker/workertest/wait"
)

// TestRunningListsHeldTasks holds two HTTP requests in a real executor
// (a script waiting for a marker file): GET /api/v1/running lists both,
// longest-running first, with request id, key and attempt, bounds the list
// by limit while total counts all, finds one task by id, needs the token,
// and lists nothing once the executor is released.
func TestRunningListsHeldTasks(t *testing.T) {
	t.Parallel()
	mark := filepath.Join(t.TempDir(), "go")
	cfg := testConfig(t, script(t, fmt.Sprintf("while [ ! -e %q ]; do sleep 0.02; done\ncat\n", mark)))
	cfg.UI.AuthToken = "tok-0123456789abcdef"
	cfg.Executor.Timeout = config.Duration(time.Minute) // held, not timed out
	s := startStack(t, cfg)
	auth := []string{"Authorization", "Bearer tok-0123456789abcdef"}
	get := func(q string) Running {
		t.Helper()
		r := do(t, "GET", s.uiURL+"/api/v1/running"+q, "", auth...)
		if r.status != 200 {
			t.Fatalf("GET running%s = %d %s", q, r.status, r.body)
		}
		var out Running
		if err := json.Unmarshal([]byte(r.body), &out); err != nil {
			t.Fatalf("running: %v in %s", err, r.body)
		}
		return out
	}
	done := make(chan resp, 2)
	go func() { done <- do(t, "POST", s.inURL+"/v1/process", "one", "X-Svc-Key", "user-1") }()
	wait.For(t, 10*time.Second, "the first request running", func() (bool, string) {
		g := get("")
		return g.Total == 1, fmt.Sprint(g)
	})
	time.Sleep(5 * time.Millisecond) // the second starts later
	go func() { done <- do(t, "POST", s.inURL+"/v1/process", "two", "X-Svc-Key", "\xff\xfe") }()
	var got Running
	wait.For(t, 10*time.Second, "both requests running, each at attempt 1", func() (bool, string) {
		got = get("")
		return got.Total == 2 && len(got.Tasks) == 2 && got.Tasks[0].Attempt == 1 && got.Tasks[1].Attempt == 1, fmt.Sprint(got)
	})
	if got.Worker != "test" {
		t.Errorf("worker = %q, want test", got.Worker)
	}
	first, second := got.Tasks[0], got.Tasks[1]
	if first.Source != "http" || first.Key != "user-1" || first.KeyEncoding != "utf-8" || first.RequestID == "" || first.TaskID == "" || first.Partition != nil || first.Alias != "" {
		t.Errorf("first = %+v, want the HTTP task of key user-1 with a request id and no Kafka coordinates", first)
	}
	if second.Key != "//4=" || second.KeyEncoding != "base64" || second.RequestID == first.RequestID {
		t.Errorf("second = %+v, want key //4= in base64 and another request id", second)
	}
	if first.StartedAtMS > second.StartedAtMS || first.ElapsedMS < second.ElapsedMS || first.ElapsedMS < 0 {
		t.Errorf("order: first started %d elapsed %d, second started %d elapsed %d; want the longest-running first",
			first.StartedAtMS, first.ElapsedMS, second.StartedAtMS, second.ElapsedMS)
	}
	if one := get("?limit=1"); one.Total != 2 || len(one.Tasks) != 1 || one.Tasks[0].TaskID != first.TaskID {
		t.Errorf("limit=1: %+v, want the first task alone and total 2", one)
	}
	for _, q := range []string{"?limit=0", "?limit=1001", "?limit=x"} {
		if r := do(t, "GET", s.uiURL+"/api/v1/running"+q, "", auth...); r.status != 400 || !strings.Contains(r.body, "limit must be an integer from 1 to 1000") {
			t.Errorf("GET running%s = %d %s, want 400 naming limit", q, r.status, r.body)
		}
	}
	if r := do(t, "GET", s.uiURL+"/api/v1/running", ""); r.status != 401 {
		t.Errorf("without token = %d, want 401", r.status)
	}
	if one := get("?task_id=" + second.TaskID); one.Total != 1 || len(one.Tasks) != 1 || one.Tasks[0].TaskID != second.TaskID || one.Tasks[0].Key != "//4=" {
		t.Errorf("task_id=%s: %+v, want that task alone", second.TaskID, one)
	}
	if none := get("?task_id=nope"); none.Total != 0 || len(none.Tasks) != 0 {
		t.Errorf("task_id=nope: %+v, want none", none)
	}

	if err := os.WriteFile(mark, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if r := <-done; r.status != 200 {
			t.Errorf("request = %d %s, want 200", r.status, r.body)
		}
	}
	if g := get(""); g.Total != 0 || len(g.Tasks) != 0 {
		t.Errorf("after release: %+v, want none running", g)
	}
}

// TestRunningSendsNoCORS: GET /api/v1/running is not a cross-origin route
// (spec 5.6-5.7: only trace, trace-by-label and databases are): an origin
// that /api/v1/debug/trace answers gets no CORS header from it, neither on
// the read nor on a preflight, and the preflight is not let past the token.
func TestRunningSendsNoCORS(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, script(t, "cat\n"))
	cfg.UI.AuthToken = "tok-0123456789abcdef"
	cfg.UI.AllowedWSOrigins = []string{"http://console.example"}
	s := startStack(t, cfg)
	auth := []string{"Authorization", "Bearer tok-0123456789abcdef"}
	origin := []string{"Origin", "http://console.example"}
	if r := do(t, "GET", s.uiURL+"/api/v1/debug/trace?task_id=x", "", append(auth, origin...)...); r.header.Get("Access-Control-Allow-Origin") != "http://console.example" {
		t.Fatalf("trace = %d %v: the origin should pass for a CORS route", r.status, r.header)
	}
	r := do(t, "GET", s.uiURL+"/api/v1/running", "", append(auth, origin...)...)
	if r.status != 200 {
		t.Errorf("GET running = %d %s, want 200", r.status, r.body)
	}
	for k := range r.header {
		if strings.HasPrefix(k, "Access-Control-") {
			t.Errorf("GET running from another origin answers %s: %v; no CORS header may be sent", k, r.header)
		}
	}
	r = do(t, "OPTIONS", s.uiURL+"/api/v1/running", "", "Origin", "http://console.example", "Access-Control-Request-Method", "GET")
	if r.status == 204 || r.header.Get("Access-Control-Allow-Origin") != "" || r.header.Get("Access-Control-Allow-Methods") != "" {
		t.Errorf("preflight of running = %d %v, want no CORS answer", r.status, r.header)
	}
}

// TestRunningFleet runs two workers sharing a folder and trusting each
// other, each holding one HTTP request in its executor: alpha's
// GET /api/v1/running?scope=fleet lists its own task and beta's (asked by
// alpha with the token, beta's URL given for the Live link) and names
// every other worker of the folder it could not list: one that refuses
// connections, one that never answers (within 3 s) and one not trusted
// (never asked). task_id finds beta's task through alpha; scope local
// (the default) lists alpha's alone; a bad scope is a 400.
func TestRunningFleet(t *testing.T) {
	if testing.Short() {
		t.Skip("two workers and a peer that never answers (3 s per fleet request): runs in the full suite")
	}
	t.Parallel()
	shared := t.TempDir()
	mark := filepath.Join(t.TempDir(), "go")
	exe := script(t, fmt.Sprintf("while [ ! -e %q ]; do sleep 0.02; done\ncat\n", mark))
	hung, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { // accepts and never answers
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := hung.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	t.Cleanup(func() { hung.Close() })
	portA, portB, deadPort, strangerPort := workertest.FreePort(t), workertest.FreePort(t), workertest.FreePort(t), workertest.FreePort(t)
	url := func(p int) string { return fmt.Sprintf("http://127.0.0.1:%d", p) }
	hungURL := "http://" + hung.Addr().String()
	worker := func(name string, port int, trusts ...string) *stack {
		cfg := testConfig(t, exe)
		cfg.Worker.Name = name
		cfg.UI.Port = port
		cfg.UI.AuthToken = "tok-0123456789abcdef"
		cfg.Shared.Dir = shared
		cfg.Fleet.TrustedURLs = trusts
		cfg.Executor.Timeout = config.Duration(time.Minute)
		return startStack(t, cfg)
	}
	a := worker("alpha", portA, url(portB), url(deadPort), hungURL)
	b := worker("beta", portB, url(portA))
	writeCard(t, shared, "dead", url(deadPort))         // trusted, refuses connections
	writeCard(t, shared, "hung", hungURL)               // trusted, never answers
	writeCard(t, shared, "stranger", url(strangerPort)) // not trusted: never asked
	auth := []string{"Authorization", "Bearer tok-0123456789abcdef"}
	get := func(q string) Running {
		t.Helper()
		r := do(t, "GET", a.uiURL+"/api/v1/running"+q, "", auth...)
		var out Running
		if r.status != 200 || json.Unmarshal([]byte(r.body), &out) != nil {
			t.Fatalf("GET running%s = %d %s", q, r.status, r.body)
		}
		return out
	}

	done := make(chan resp, 2)
	go func() { done <- do(t, "POST", a.inURL+"/v1/process", "a", "X-Svc-Key", "key-a") }()
	go func() { done <- do(t, "POST", b.inURL+"/v1/process", "b", "X-Svc-Key", "key-b") }()
	var got Running
	wait.For(t, wait.Long, "alpha's fleet list with beta's task and three workers missing", func() (bool, string) {
		got = get("?scope=fleet")
		// A task is listed from its arrival: wait for both attempts to start.
		return got.Total == 1 && len(got.Peers) == 1 && got.Peers[0].Total == 1 && len(got.Missing) == 3 &&
			len(got.Tasks) == 1 && got.Tasks[0].Attempt == 1 && len(got.Peers[0].Tasks) == 1 && got.Peers[0].Tasks[0].Attempt == 1, fmt.Sprintf("%+v", got)
	})
	if got.Worker != "alpha" || got.Scope != "fleet" || got.Tasks[0].Key != "key-a" || got.Tasks[0].Attempt != 1 {
		t.Errorf("alpha's own part = %+v, want alpha's task of key-a at attempt 1", got)
	}
	peer := got.Peers[0]
	if peer.Worker != "beta" || peer.URL != url(portB) || len(peer.Tasks) != 1 || peer.Tasks[0].Key != "key-b" || peer.Tasks[0].Source != "http" || peer.Tasks[0].Attempt != 1 {
		t.Errorf("peer = %+v, want beta at %s running the task of key-b at attempt 1", peer, url(portB))
	}
	reasons := map[string]string{}
	for _, m := range got.Missing {
		reasons[m.Worker] = m.Reason
	}
	if !strings.HasPrefix(reasons["dead"], "did not answer") || reasons["hung"] != "did not answer within 3s" || !strings.HasPrefix(reasons["stranger"], "not trusted") {
		t.Errorf("missing = %+v, want dead not answering, hung not answering within 3s, stranger not trusted", got.Missing)
	}
	if one := get("?scope=fleet&task_id=" + peer.Tasks[0].TaskID); len(one.Tasks) != 0 || len(one.Peers) != 1 || len(one.Peers[0].Tasks) != 1 || one.Peers[0].Tasks[0].TaskID != peer.Tasks[0].TaskID {
		t.Errorf("fleet task_id = %+v, want beta's task alone", one)
	}
	if local := get(""); local.Scope != "local" || local.Total != 1 || len(local.Peers) != 0 || len(local.Missing) != 0 {
		t.Errorf("scope local = %+v, want alpha's task alone", local)
	}
	if r := do(t, "GET", a.uiURL+"/api/v1/running?scope=all", "", auth...); r.status != 400 || !strings.Contains(r.body, "scope must be local") {
		t.Errorf("scope=all = %d %s, want 400 naming scope", r.status, r.body)
	}
	if err := os.WriteFile(mark, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if r := <-done; r.status != 200 {
			t.Errorf("request = %d %s, want 200", r.status, r.body)
		}
	}
}
