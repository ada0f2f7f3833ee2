package httpd

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"svc/worker/config"
	"svc/worker/workertest/wait"
)

// TestRunningListsHeldTasks holds two HTTP requests in a real executor
// (a script waiting for a marker file): GET /api/v1/running lists both,
// longest-running first, with request id, key and attempt, bounds the list
// by limit while total counts all, needs the token, answers a CORS
// preflight, and lists nothing once the executor is released.
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
	if r := do(t, "OPTIONS", s.uiURL+"/api/v1/running", "", "Origin", s.uiURL, "Access-Control-Request-Method", "GET"); r.status != 204 || r.header.Get("Access-Control-Allow-Origin") != s.uiURL {
		t.Errorf("preflight = %d %v, want 204 allowing %s", r.status, r.header, s.uiURL)
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
