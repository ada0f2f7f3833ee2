package httpd

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"svc/worker/workertest"
	"svc/worker/workertest/wait"
)

// trendsBody is the part of GET /api/v1/dashboard/trends the tests read.
type trendsBody struct {
	WindowSeconds int64 `json:"window_seconds"`
	StepSeconds   int64 `json:"step_seconds"`
	Scope         string
	Workers       []struct {
		Worker      string `json:"worker"`
		Self        bool   `json:"self"`
		StepSeconds int64  `json:"step_seconds"`
		MaxPoints   int    `json:"max_points"`
		Available   int64  `json:"available_from_ms"`
		Points      []struct {
			TS     int64  `json:"ts_ms"`
			OK     int64  `json:"ok"`
			Failed int64  `json:"failed"`
			Lag    *int64 `json:"lag"`
			Open   bool   `json:"open"`
		} `json:"points"`
	} `json:"workers"`
	Fleet []struct {
		TS     int64 `json:"ts_ms"`
		OK     int64 `json:"ok"`
		Failed int64 `json:"failed"`
	} `json:"fleet"`
	Missing []struct {
		Worker string `json:"worker"`
		Reason string `json:"reason"`
	} `json:"missing"`
}

// TestDashboardTrends: the trends route answers each worker's tasks per
// 10-second step and their sum for the fleet: a probe is not counted, a
// failure is counted apart; the other workers of the shared folder are
// asked with the token (a trusted one answers, one that does not is named
// missing, an untrusted card is named missing and never asked); scope
// self answers this worker alone; the answer is bounded (361 points of 10
// s for an hour, 5-minute steps beyond); a bad query is a 400 with error
// and detail.
func TestDashboardTrends(t *testing.T) {
	t.Parallel()
	shared := t.TempDir()
	exe := script(t, `in=$(cat); case "$in" in *bad*) exit 1;; esac; echo ok`)
	portA, portB, deadPort, strangerPort := workertest.FreePort(t), workertest.FreePort(t), workertest.FreePort(t), workertest.FreePort(t)
	url := func(p int) string { return fmt.Sprintf("http://127.0.0.1:%d", p) }
	worker := func(name string, port int, trusts ...string) *stack {
		cfg := testConfig(t, exe)
		cfg.Worker.Name = name
		cfg.UI.Port = port
		cfg.UI.AuthToken = "tok-0123456789abcdef"
		cfg.Shared.Dir = shared
		cfg.Fleet.TrustedURLs = trusts
		return startStack(t, cfg)
	}
	a := worker("alpha", portA, url(portB), url(deadPort))
	b := worker("beta", portB, url(portA))
	writeCard(t, shared, "dead", url(deadPort))         // trusted, nobody answers there
	writeCard(t, shared, "stranger", url(strangerPort)) // not trusted: never asked
	auth := []string{"Authorization", "Bearer tok-0123456789abcdef"}

	for _, q := range []string{"window=abc", "window=30s", "window=25h", "scope=everyone"} {
		r := do(t, "GET", a.uiURL+"/api/v1/dashboard/trends?"+q, "", auth...)
		var e ErrorBody
		if r.status != 400 || json.Unmarshal([]byte(r.body), &e) != nil || e.Error != "bad_request" || e.Detail == "" {
			t.Errorf("trends?%s = %d %s, want 400 with error bad_request and a detail", q, r.status, r.body)
		}
	}
	if r := do(t, "GET", a.uiURL+"/api/v1/dashboard/trends", ""); r.status != 401 {
		t.Errorf("trends without the token = %d, want 401", r.status)
	}

	for _, body := range []string{"one", "two", "bad"} {
		do(t, "POST", a.inURL+"/v1/process", body)
	}
	for _, body := range []string{"x", "y", "z"} {
		do(t, "POST", b.inURL+"/v1/process", body)
	}
	if r := do(t, "POST", a.uiURL+"/api/v1/debug/probe", `{"payload":"probe me"}`, auth...); r.status != 200 {
		t.Fatalf("probe = %d %s", r.status, r.body)
	}

	var got trendsBody
	sums := func(i int) (ok, failed int64) {
		for _, p := range got.Workers[i].Points {
			ok += p.OK
			failed += p.Failed
		}
		return ok, failed
	}
	wait.For(t, wait.Long, "alpha's trends with beta's and the missing workers named", func() (bool, string) {
		r := do(t, "GET", a.uiURL+"/api/v1/dashboard/trends?window=1h", "", auth...)
		got = trendsBody{}
		if r.status != 200 || json.Unmarshal([]byte(r.body), &got) != nil {
			return false, fmt.Sprintf("%d %s", r.status, r.body)
		}
		return len(got.Workers) == 2 && len(got.Missing) == 2, r.body
	})
	if got.WindowSeconds != 3600 || got.StepSeconds != 10 || got.Scope != "fleet" {
		t.Errorf("window %d, step %d, scope %q; want 3600, 10, fleet", got.WindowSeconds, got.StepSeconds, got.Scope)
	}
	if w := got.Workers[0]; w.Worker != "alpha" || !w.Self || got.Workers[1].Worker != "beta" || got.Workers[1].Self {
		t.Errorf("workers = %+v, want alpha (self) then beta", got.Workers)
	}
	for _, w := range got.Workers {
		if w.StepSeconds != 10 || w.MaxPoints != 361 || len(w.Points) == 0 || len(w.Points) > w.MaxPoints || !w.Points[len(w.Points)-1].Open || w.Available == 0 {
			t.Errorf("worker %s: step %d, max %d, %d points; want 10 s steps, at most 361 points, the newest open", w.Worker, w.StepSeconds, w.MaxPoints, len(w.Points))
		}
		for _, p := range w.Points {
			if p.Lag != nil {
				t.Errorf("worker %s point %+v has a lag: an HTTP-only worker has none", w.Worker, p)
			}
		}
	}
	if ok, failed := sums(0); ok != 2 || failed != 1 {
		t.Errorf("alpha's points add to %d ok, %d failed; want 2 and 1 (the probe is not traffic)", ok, failed)
	}
	if ok, failed := sums(1); ok != 3 || failed != 0 {
		t.Errorf("beta's points add to %d ok, %d failed; want 3 and 0", ok, failed)
	}
	var fok, ffailed int64
	for _, p := range got.Fleet {
		fok, ffailed = fok+p.OK, ffailed+p.Failed
	}
	if fok != 5 || ffailed != 1 {
		t.Errorf("fleet points add to %d ok, %d failed; want 5 and 1", fok, ffailed)
	}
	reasons := map[string]string{}
	for _, m := range got.Missing {
		reasons[m.Worker] = m.Reason
	}
	if !strings.Contains(reasons["stranger"], "not trusted") || reasons["dead"] == "" || strings.Contains(reasons["dead"], "not trusted") {
		t.Errorf("missing = %+v, want stranger not trusted and dead failing to answer", got.Missing)
	}

	r := do(t, "GET", a.uiURL+"/api/v1/dashboard/trends?scope=self&window=6h", "", auth...)
	got = trendsBody{}
	if r.status != 200 || json.Unmarshal([]byte(r.body), &got) != nil || len(got.Workers) != 1 || len(got.Missing) != 0 ||
		got.StepSeconds != 300 || got.Workers[0].MaxPoints != 289 || len(got.Workers[0].Points) > 289 {
		t.Errorf("trends?scope=self&window=6h = %d %s, want alpha alone in 5-minute steps, at most 289 points", r.status, r.body)
	}
	if ok, failed := sums(0); ok != 2 || failed != 1 {
		t.Errorf("alpha's 5-minute points add to %d ok, %d failed; want 2 and 1", ok, failed)
	}
}
