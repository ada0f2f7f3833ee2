package httpd

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"svc/worker"
	"svc/worker/config"
	"svc/worker/workertest"
	"svc/worker/workertest/wait"
)

// countingExec is an executor that appends one line per run to a log file,
// so a test can tell whether a request reached it.
func countingExec(t *testing.T, extra string) (binary, log string) {
	log = filepath.Join(t.TempDir(), "runs.log")
	return script(t, fmt.Sprintf("echo run >> %s\n%s\ncat", log, extra)), log
}

func withClients(cfg *config.Config, rpm int) {
	cfg.Sources.HTTP.Clients = []config.HTTPClient{{Name: "alpha", Token: "tok-alpha-0123456789", RPM: rpm}, {Name: "beta", Token: "tok-beta-0123456789", RPM: rpm}}
}

func TestIngressAuthAndSizeRejectionsNeverReachExecutor(t *testing.T) {
	t.Parallel()
	bin, log := countingExec(t, "")
	cfg := testConfig(t, bin)
	withClients(cfg, 600)
	cfg.Sources.HTTP.MaxBodyBytes = 100
	s := startStack(t, cfg)
	url := s.inURL + "/v1/process"

	cases := []struct {
		name   string
		query  string
		body   string
		header []string
		want   int
		code   string
	}{
		{"no token", "", "x", nil, 401, "unauthorized"},
		{"wrong token", "", "x", []string{"Authorization", "Bearer tok-gamma-0123456789"}, 401, "unauthorized"},
		{"ui-style query token is not accepted", "?token=tok-alpha-0123456789", "x", nil, 401, "unauthorized"},
		{"body over max_body_bytes", "", strings.Repeat("y", 101), []string{"Authorization", "Bearer tok-alpha-0123456789"}, 413, "body_too_large"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := do(t, "POST", url+c.query, c.body, c.header...)
			var e ErrorBody
			_ = json.Unmarshal([]byte(r.body), &e)
			if r.status != c.want || e.Error != c.code || e.Detail == "" {
				t.Fatalf("= %d %s, want %d %s", r.status, r.body, c.want, c.code)
			}
			if c.want == 401 && r.header.Get("WWW-Authenticate") == "" {
				t.Error("401 without WWW-Authenticate")
			}
		})
	}
	// Chunked body (no Content-Length) over the cap is cut while reading.
	r := do(t, "POST", url, strings.Repeat("z", 1000), "Authorization", "Bearer tok-beta-0123456789", "Transfer-Encoding", "chunked")
	if r.status != 413 {
		t.Errorf("streamed oversized body = %d, want 413", r.status)
	}
	if n := lines(t, log); n != 0 {
		t.Fatalf("executor ran %d times for rejected requests, want 0", n)
	}
	r = do(t, "POST", url, "exactly fine", "Authorization", "Bearer tok-alpha-0123456789")
	if r.status != 200 || lines(t, log) != 1 {
		t.Fatalf("good request = %d %s, executor runs %d", r.status, r.body, lines(t, log))
	}
}

func TestIngressRateLimitPerClient(t *testing.T) {
	t.Parallel()
	bin, log := countingExec(t, "")
	cfg := testConfig(t, bin)
	withClients(cfg, 3)
	s := startStack(t, cfg)
	url := s.inURL + "/v1/process"
	for i := range 3 {
		if r := do(t, "POST", url, "m", "Authorization", "Bearer tok-alpha-0123456789"); r.status != 200 {
			t.Fatalf("request %d = %d %s", i+1, r.status, r.body)
		}
	}
	r := do(t, "POST", url, "m", "Authorization", "Bearer tok-alpha-0123456789")
	if r.status != 429 || !strings.Contains(r.body, `"error":"rate_limited"`) {
		t.Fatalf("4th request = %d %s, want 429", r.status, r.body)
	}
	ra, err := strconv.Atoi(r.header.Get("Retry-After"))
	if err != nil || ra < 1 || ra > 60 {
		t.Errorf("Retry-After = %q, want 1-60 seconds", r.header.Get("Retry-After"))
	}
	// The other client has its own window.
	if r := do(t, "POST", url, "m", "Authorization", "Bearer tok-beta-0123456789"); r.status != 200 {
		t.Errorf("other client = %d, want 200", r.status)
	}
	if n := lines(t, log); n != 4 {
		t.Errorf("executor runs = %d, want 4 (the 429 never reached it)", n)
	}
}

func TestSlidingWindow(t *testing.T) {
	t.Parallel()
	w := newSlidingWindow(2, time.Minute)
	t0 := time.Unix(1000, 0)
	steps := []struct {
		at   time.Duration
		ok   bool
		wait time.Duration
	}{
		{0, true, 0},
		{10 * time.Second, true, 0},
		{20 * time.Second, false, 40 * time.Second},
		{60 * time.Second, true, 0}, // the first admission left the window
		{65 * time.Second, false, 5 * time.Second},
		{70 * time.Second, true, 0},
	}
	for _, s := range steps {
		ok, wait := w.allow(t0.Add(s.at))
		if ok != s.ok || wait != s.wait {
			t.Errorf("allow(+%v) = %v, %v; want %v, %v", s.at, ok, wait, s.ok, s.wait)
		}
	}
}

func TestIngressShedsOverMaxConcurrent(t *testing.T) {
	t.Parallel()
	gate := filepath.Join(t.TempDir(), "release")
	bin, log := countingExec(t, fmt.Sprintf("while [ ! -e %s ]; do sleep 0.02; done", gate))
	cfg := testConfig(t, bin)
	cfg.Sources.HTTP.MaxConcurrent = 2
	cfg.Executor.PoolSize = 4
	s := startStack(t, cfg)
	url := s.inURL + "/v1/process"

	var wg sync.WaitGroup
	codes := make(chan int, 2)
	for range 2 {
		wg.Add(1)
		go func() { defer wg.Done(); codes <- do(t, "POST", url, "held").status }()
	}
	wait.For(t, wait.Long, "two requests to reach the executor", func() (bool, string) {
		n := lines(t, log)
		return n == 2, fmt.Sprintf("%d reached it", n)
	})
	r := do(t, "POST", url, "shed me")
	if r.status != 503 || !strings.Contains(r.body, `"error":"overloaded"`) || r.header.Get("Retry-After") == "" {
		t.Errorf("third request = %d %s, want 503 overloaded with Retry-After", r.status, r.body)
	}
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(codes)
	for c := range codes {
		if c != 200 {
			t.Errorf("held request = %d, want 200", c)
		}
	}
	if n := lines(t, log); n != 2 {
		t.Errorf("executor runs = %d, want 2 (shed request never ran)", n)
	}
}

func TestIngressExecutorFailureShapes(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		script  string
		timeout time.Duration
		status  int
		task    string
	}{
		{"ok echoes output", "cat", 5 * time.Second, 200, "ok"},
		{"failure is 502", "cat >/dev/null; echo boom >&2; exit 4", 5 * time.Second, 502, "failed"},
		{"timeout is 504", "sleep 30", 200 * time.Millisecond, 504, "timeout"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := testConfig(t, script(t, c.script))
			cfg.Executor.Timeout = config.Duration(c.timeout)
			cfg.Handler.MaxAttempts = 1
			s := startStack(t, cfg)
			r := do(t, "POST", s.inURL+"/v1/process", "payload-1", "X-Svc-Label-customer", "acme")
			var body worker.ExecResponse
			if err := json.Unmarshal([]byte(r.body), &body); err != nil {
				t.Fatalf("body %q: %v", r.body, err)
			}
			if r.status != c.status || body.Status != c.task || len(body.Tasks) != 1 || body.RequestID == "" {
				t.Fatalf("= %d %s, want %d with status %s", r.status, r.body, c.status, c.task)
			}
			tk := body.Tasks[0]
			if tk.Status != c.task || tk.TaskID == "" || tk.OutputEncoding != "utf-8" {
				t.Errorf("task = %+v", tk)
			}
			if c.status == 200 && tk.Output != "payload-1" {
				t.Errorf("output = %q, want the body echoed", tk.Output)
			}
			if c.status != 200 && (body.Error == "" || tk.Error == "") {
				t.Errorf("failure without error text: %s", r.body)
			}
		})
	}
}

func TestIngressBinaryOutputIsBase64(t *testing.T) {
	t.Parallel()
	s := startStack(t, testConfig(t, script(t, `printf '\377\376'`)))
	r := do(t, "POST", s.inURL+"/v1/process", "x")
	var body worker.ExecResponse
	_ = json.Unmarshal([]byte(r.body), &body)
	if r.status != 200 || body.Tasks[0].OutputEncoding != "base64" || body.Tasks[0].Output != "//4=" {
		t.Errorf("= %d %s, want base64 //4=", r.status, r.body)
	}
}

// TestIngressMissingExecutorKeepsServing: an executor removed while the
// worker runs (config load refuses a missing one) makes the executor
// unavailable: each request is answered 503 executor_unavailable with
// Retry-After (nothing ran; not a 502 blaming the request), /readyz names
// executor.binary_path, and the worker keeps serving: once the binary is
// back, requests run again.
func TestIngressMissingExecutorKeepsServing(t *testing.T) {
	t.Parallel()
	bin := script(t, "cat")
	cfg := testConfig(t, bin)
	cfg.Handler.MaxAttempts = 1
	s := startStack(t, cfg)
	if err := os.Rename(bin, bin+".away"); err != nil {
		t.Fatal(err)
	}
	for i := range 2 { // the first finds out, the second is refused up front
		r := do(t, "POST", s.inURL+"/v1/process", "x")
		if r.status != 503 || !strings.Contains(r.body, `"error":"executor_unavailable"`) || r.header.Get("Retry-After") == "" {
			t.Errorf("request %d with the executor missing = %d %s, want 503 executor_unavailable with Retry-After", i, r.status, r.body)
		}
	}
	if r := do(t, "GET", s.uiURL+"/readyz", ""); r.status != 503 || !strings.Contains(r.body, "executor: executor.binary_path cannot be started") {
		t.Errorf("readyz with the executor missing = %d %s, want 503 naming executor.binary_path", r.status, r.body)
	}
	if r := do(t, "GET", s.uiURL+"/healthz", ""); r.status != 200 {
		t.Errorf("healthz after executor failure = %d", r.status)
	}
	if err := os.Rename(bin+".away", bin); err != nil {
		t.Fatal(err)
	}
	wait.For(t, wait.Long, "readyz answers 200 once the executor is back", func() (bool, string) {
		r := do(t, "GET", s.uiURL+"/readyz", "")
		return r.status == 200, r.body
	})
	if r := do(t, "POST", s.inURL+"/v1/process", "back"); r.status != 200 {
		t.Errorf("request once the executor is back = %d %s, want 200", r.status, r.body)
	}
}

// TestIngressExecutorUnavailableAnswers503: while the executor cannot get
// ready (persistent children that exit at once), the ingress answers 503
// executor_unavailable with Retry-After at once, rather than running the
// request into a failure (502) or holding it; /readyz names the executor.
// Once the executor works, requests are served again.
func TestIngressExecutorUnavailableAnswers503(t *testing.T) {
	t.Parallel()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	fixed := filepath.Join(t.TempDir(), "fixed")
	bin := script(t, fmt.Sprintf("[ -e %q ] || { echo 'cannot load the model' >&2; exit 1; }\nexec %q exec-demo", fixed, self))
	cfg := testConfig(t, bin)
	cfg.Executor.Mode = "persistent"
	s := startStack(t, cfg)

	for i := range 2 { // the first may arrive while the children still start
		start := time.Now()
		r := do(t, "POST", s.inURL+"/v1/process", "x")
		var e ErrorBody
		_ = json.Unmarshal([]byte(r.body), &e)
		if r.status != 503 || e.Error != "executor_unavailable" || !strings.Contains(e.Detail, "executor") || r.header.Get("Retry-After") == "" {
			t.Fatalf("request %d = %d %s (Retry-After %q), want 503 executor_unavailable with Retry-After", i, r.status, r.body, r.header.Get("Retry-After"))
		}
		if took := time.Since(start); took > 20*time.Second {
			t.Errorf("request %d was held %s before its 503", i, took)
		}
	}
	r := do(t, "GET", s.uiURL+"/readyz", "")
	if r.status != 503 || !strings.Contains(r.body, "executor: ") {
		t.Errorf("readyz = %d %s, want 503 with a reason naming the executor", r.status, r.body)
	}
	if r := do(t, "GET", s.uiURL+"/healthz", ""); r.status != 200 {
		t.Errorf("healthz = %d, want 200 (the process serves)", r.status)
	}

	if err := os.WriteFile(fixed, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	wait.For(t, wait.Long, "readyz answers 200 once the executor works", func() (bool, string) {
		r := do(t, "GET", s.uiURL+"/readyz", "")
		return r.status == 200, r.body
	})
	if r := do(t, "POST", s.inURL+"/v1/process", "hello"); r.status != 200 {
		t.Errorf("request after the recovery = %d %s, want 200", r.status, r.body)
	}
}

// With sinks_enabled a failed task goes to the DLQ; when the DLQ cannot take
// it, the caller is told to retry instead of getting a plain failure.
func TestIngressDLQUnavailableAsksForRetry(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, script(t, "cat >/dev/null; exit 2"))
	cfg.Handler.MaxAttempts = 1
	cfg.Sources.HTTP.SinksEnabled = true
	cfg.Sinks.Kafka = []config.KafkaSink{{Name: "out", Topic: "out", Brokers: []string{"127.0.0.1:1"}}}
	cfg.DLQ.Topic, cfg.DLQ.Brokers = "failed", []string{"127.0.0.1:1"}
	cfg.DLQ.SendTimeout = config.Duration(300 * time.Millisecond)
	cfg.Resolve()
	s := startStack(t, cfg)
	r := do(t, "POST", s.inURL+"/v1/process", "boom")
	if r.status != 503 || !strings.Contains(r.body, `"error":"dlq_unavailable"`) || r.header.Get("Retry-After") == "" {
		t.Fatalf("= %d %s, want 503 dlq_unavailable with Retry-After", r.status, r.body)
	}
}

// TestSlowBodiesDoNotStarveTheIngress: clients that send their bodies a
// byte at a time neither hold the pipeline's slots (a slot is taken only
// once the body is read) nor get past their own concurrency cap, and a
// body slower than body_timeout gets 408; other clients are served all
// along.
func TestSlowBodiesDoNotStarveTheIngress(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, "/bin/cat")
	cfg.Sources.HTTP.MaxConcurrent = 2
	cfg.Sources.HTTP.MaxConcurrentPerClient = 4
	cfg.Sources.HTTP.BodyTimeout = config.Duration(800 * time.Millisecond)
	cfg.Sources.HTTP.Clients = []config.HTTPClient{{Name: "slow", Token: "slow-token-0123456789", RPM: 1000}, {Name: "good", Token: "good-token-0123456789", RPM: 1000}}
	s := startStack(t, cfg)
	addr := strings.TrimPrefix(s.inURL, "http://")

	var conns []net.Conn
	for range 6 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		fmt.Fprintf(c, "POST /v1/process HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer slow-token-0123456789\r\nContent-Length: 100\r\n\r\nx", addr)
	}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	time.Sleep(100 * time.Millisecond) // let the slow requests reach the server
	for i := range 4 {
		r := do(t, "POST", s.inURL+"/v1/process", fmt.Sprintf("good %d", i), "Authorization", "Bearer good-token-0123456789")
		if r.status != 200 {
			t.Fatalf("good client request %d while 6 slow bodies trickle = %d %s, want 200", i, r.status, r.body)
		}
	}
	statuses := map[int]int{}
	for i, c := range conns {
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("reading slow client %d's answer: %v (so far %v)", i, err, statuses)
		}
		resp.Body.Close()
		statuses[resp.StatusCode]++
	}
	if statuses[429] != 2 || statuses[408] != 4 {
		t.Errorf("slow client answers = %v, want 2 × 429 (over its 4 concurrent requests) and 4 × 408 (body_timeout)", statuses)
	}
	if got := workertest.Metric(t, s.reg, "svc_ingress_rejections_total", "reason", "body_timeout"); got != 4 {
		t.Errorf("svc_ingress_rejections_total{reason=body_timeout} = %v, want 4", got)
	}
}

// TestIngressRefusesWebPages: the ingress serves programs; a browser page
// of another site cannot push bytes through the executor, and a worker
// whose ingress is bound to loopback answers only loopback names.
func TestIngressRefusesWebPages(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, "/bin/cat")
	s := startStack(t, cfg)
	for _, h := range [][]string{{"Origin", "https://evil.example"}, {"Sec-Fetch-Site", "cross-site"}, {"Origin", "null"}} {
		r := do(t, "POST", s.inURL+"/v1/process", "x", "Content-Type", "text/plain", h[0], h[1])
		if r.status != 403 {
			t.Errorf("ingress POST with %s: %s = %d %s, want 403", h[0], h[1], r.status, r.body)
		}
	}
	if r := do(t, "POST", s.inURL+"/v1/process", "x"); r.status != 200 {
		t.Errorf("ingress POST from a program = %d %s, want 200", r.status, r.body)
	}
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(s.inURL, "http://"))
	if r := send(t, "POST", s.inURL+"/v1/process", "rebind.attacker.example:"+port, "x"); r.status != 403 || !strings.Contains(r.body, "sources.http.allowed_hosts") {
		t.Errorf("loopback-bound ingress with a foreign Host = %d %s, want 403 naming sources.http.allowed_hosts", r.status, r.body)
	}
}
