package httpd

import (
	"bufio"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"svc/worker/config"
	"svc/worker/workertest"
)

func TestUITokenGate(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, "/bin/cat")
	cfg.UI.AuthToken = "ui-secret-0123456789"
	s := startStack(t, cfg)

	cases := []struct {
		name   string
		path   string
		header []string
		want   int
	}{
		{"no token", "/api/v1/identity", nil, 401},
		{"wrong header token", "/api/v1/identity", []string{"Authorization", "Bearer nope"}, 401},
		{"wrong query token", "/api/v1/identity?token=nope", nil, 401},
		{"header token", "/api/v1/identity", []string{"Authorization", "Bearer ui-secret-0123456789"}, 200},
		{"lowercase bearer", "/api/v1/identity", []string{"Authorization", "bearer ui-secret-0123456789"}, 200},
		{"query token", "/api/v1/identity?token=ui-secret-0123456789", nil, 200},
		{"page needs token", "/", nil, 401},
		{"healthz public", "/healthz", nil, 200},
		{"readyz public", "/readyz", nil, 200},
		{"peer routes public", "/api/v1/peer/cache/changes", nil, 404},
		{"unknown api route gated", "/api/v1/nope", nil, 401},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := do(t, "GET", s.uiURL+c.path, "", c.header...)
			if r.status != c.want {
				t.Fatalf("GET %s = %d %s, want %d", c.path, r.status, r.body, c.want)
			}
			if r.status == 401 {
				if got := r.header.Get("WWW-Authenticate"); !strings.HasPrefix(got, "Bearer") {
					t.Errorf("WWW-Authenticate = %q, want Bearer challenge", got)
				}
				var e ErrorBody
				switch {
				case !strings.HasPrefix(c.path, "/api/"):
					// A page answers the sign-in page (the UI release is
					// always there to serve it, cached or not).
					if !strings.Contains(r.body, `name="token"`) {
						t.Errorf("401 page = %s, want the sign-in form", r.body)
					}
				case json.Unmarshal([]byte(r.body), &e) != nil || e.Error != "unauthorized" || e.Detail == "":
					t.Errorf("401 body = %s, want {error:unauthorized, detail}", r.body)
				}
				if strings.Contains(r.body, "ui-secret-0123456789") {
					t.Error("401 body echoes the token")
				}
			}
		})
	}
}

func TestUIPublicRoutesShapes(t *testing.T) {
	t.Parallel()
	s := startStack(t, testConfig(t, "/bin/cat"))
	if r := do(t, "GET", s.uiURL+"/healthz", ""); r.status != 200 || !strings.Contains(r.body, `"status":"ok"`) {
		t.Errorf("healthz = %d %s", r.status, r.body)
	}
	if r := do(t, "GET", s.uiURL+"/readyz", ""); r.status != 200 || !strings.Contains(r.body, `"status":"ready"`) {
		t.Errorf("readyz = %d %s", r.status, r.body)
	}
	s.app.SetReady("kafka", "consumer group not joined yet")
	r := do(t, "GET", s.uiURL+"/readyz", "")
	if r.status != 503 || !strings.Contains(r.body, "consumer group not joined yet") {
		t.Errorf("readyz while not ready = %d %s, want 503 with the reason", r.status, r.body)
	}
}

func TestUIIdentityConfigMetrics(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, "/bin/cat")
	cfg.UI.AuthToken = "ui-secret-0123456789"
	cfg.Executor.Env = map[string]string{"DB_PASSWORD": "hunter2"}
	s := startStack(t, cfg)
	auth := []string{"Authorization", "Bearer ui-secret-0123456789"}

	var id Identity
	r := do(t, "GET", s.uiURL+"/api/v1/identity", "", auth...)
	if err := json.Unmarshal([]byte(r.body), &id); err != nil {
		t.Fatal(err)
	}
	if id.Worker != "test" || id.Contract != "v1.14" || id.CustomRenderers || id.StartedAtMS == 0 || !strings.HasPrefix(id.URL, "http://127.0.0.1:") {
		t.Errorf("identity = %+v", id)
	}

	r = do(t, "GET", s.uiURL+"/api/v1/config", "", auth...)
	if r.status != 200 || strings.Contains(r.body, "ui-secret-0123456789") || strings.Contains(r.body, "hunter2") || !strings.Contains(r.body, `"DB_PASSWORD":"***"`) {
		t.Errorf("config view leaks or lacks masking: %s", r.body)
	}

	// One task through the ingress makes svc_tasks_total appear.
	if r := do(t, "POST", s.inURL+"/v1/process", "x"); r.status != 200 {
		t.Fatalf("ingress = %d %s", r.status, r.body)
	}
	r = do(t, "GET", s.uiURL+"/api/v1/debug/metrics", "", auth...)
	var m struct {
		Families []MetricFamily `json:"families"`
	}
	if err := json.Unmarshal([]byte(r.body), &m); err != nil {
		t.Fatal(err)
	}
	found := map[string]float64{}
	for _, f := range m.Families {
		for _, smp := range f.Samples {
			found[f.Name] += smp.Value
		}
	}
	if found["svc_tasks_total"] != 1 || found["svc_executor_pool_size"] != 2 {
		t.Errorf("metrics: svc_tasks_total=%v svc_executor_pool_size=%v", found["svc_tasks_total"], found["svc_executor_pool_size"])
	}
	if _, ok := found["go_goroutines"]; !ok {
		t.Error("Go collector missing from /api/v1/debug/metrics")
	}

	// ?name= answers the named families only (the Dashboard asks for
	// the ones it shows); a name no family has is left out.
	r = do(t, "GET", s.uiURL+"/api/v1/debug/metrics?name=svc_tasks_total&name=go_goroutines&name=svc_no_such", "", auth...)
	m.Families = nil
	if err := json.Unmarshal([]byte(r.body), &m); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range m.Families {
		names = append(names, f.Name)
	}
	if slices.Sort(names); !slices.Equal(names, []string{"go_goroutines", "svc_tasks_total"}) || len(m.Families[0].Samples) == 0 {
		t.Errorf("?name= filter answered families %v, want go_goroutines and svc_tasks_total", names)
	}
	many := strings.Repeat("name=x&", 101)
	if r := do(t, "GET", s.uiURL+"/api/v1/debug/metrics?"+many, "", auth...); r.status != 400 || !strings.Contains(r.body, `"bad_request"`) {
		t.Errorf("101 names = %d %s, want 400 bad_request", r.status, r.body)
	}
}

func TestUIPagesWithoutBundle(t *testing.T) {
	t.Parallel()
	s := startStack(t, testConfig(t, "/bin/cat"))
	for _, p := range []string{"/", "/live", "/p/orders"} {
		r := do(t, "GET", s.uiURL+p, "")
		if r.status != 503 || !strings.Contains(r.body, "ui_bundle_missing") {
			t.Errorf("GET %s = %d %s, want 503 ui_bundle_missing", p, r.status, r.body)
		}
	}
	if r := do(t, "GET", s.uiURL+"/api/v1/pages", ""); r.status != 200 || strings.TrimSpace(r.body) != "[]" {
		t.Errorf("pages = %d %s, want []", r.status, r.body)
	}
}

func TestUIBodyLimit(t *testing.T) {
	t.Parallel()
	s := startStack(t, testConfig(t, "/bin/cat"))
	big := strings.Repeat("x", uiMaxBodyBytes+1)
	r := do(t, "POST", s.uiURL+"/api/v1/debug/probe", big)
	if r.status != 413 || !strings.Contains(r.body, "body_too_large") {
		t.Errorf("oversized body = %d %s, want 413", r.status, r.body)
	}
}

func TestUISlowHeaderClientIsCutOff(t *testing.T) {
	t.Parallel()
	s := startStack(t, testConfig(t, "/bin/cat"), func(s *stack) {
		s.ui.srv.ReadHeaderTimeout, s.ui.srv.ReadTimeout, s.ui.srv.IdleTimeout = 300*time.Millisecond, 300*time.Millisecond, time.Second
	})
	conn, err := net.Dial("tcp", s.ui.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// Start a request but never finish the header block.
	if _, err := conn.Write([]byte("GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ")); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err == nil {
		// The server may answer 408 before closing; either way no 200.
		if resp.StatusCode == 200 {
			t.Fatalf("slow-header client got 200")
		}
		return
	}
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("server kept a slow-header connection open: %v", err)
	}
}

func TestRenderersModule(t *testing.T) {
	t.Parallel()
	s := startStack(t, testConfig(t, "/bin/cat"))
	r := do(t, "GET", s.uiURL+"/api/v1/ui/renderers.js", "")
	if r.status != 404 || !strings.Contains(r.body, `"enabled":false`) || !strings.Contains(r.body, `"reason"`) {
		t.Errorf("renderers unset = %d %s", r.status, r.body)
	}

	mod := filepath.Join(t.TempDir(), "r.js")
	src := "export default { big: (v) => document.createElement('b') };\n"
	if err := os.WriteFile(mod, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t, "/bin/cat")
	cfg.UI.CustomRenderersPath = mod
	cfg.UI.AuthToken = "tok-0123456789abcdef"
	s2 := startStack(t, cfg)
	r = do(t, "GET", s2.uiURL+"/api/v1/ui/renderers.js?token=tok-0123456789abcdef", "")
	if r.status != 200 || r.body != src || !strings.HasPrefix(r.header.Get("Content-Type"), "text/javascript") {
		t.Fatalf("renderers = %d %q %s", r.status, r.body, r.header.Get("Content-Type"))
	}
	etag := r.header.Get("ETag")
	if etag == "" {
		t.Fatal("no ETag")
	}
	r = do(t, "GET", s2.uiURL+"/api/v1/ui/renderers.js?token=tok-0123456789abcdef", "", "If-None-Match", etag)
	if r.status != 304 {
		t.Errorf("matching If-None-Match = %d, want 304", r.status)
	}
}

// TestConsumePauseWithoutKafkaSource: without a Kafka source the state is
// always 200 and inactive, a pause or resume answers 503 (no consumer) when
// the feature is on and 403 naming the key when it is off.
func TestConsumePauseWithoutKafkaSource(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, "/bin/cat")
	cfg.UI.ConsumePause.Enabled = true
	on := startStack(t, cfg)
	r := do(t, "GET", on.uiURL+"/api/v1/debug/consume-pause", "")
	if r.status != 200 || !strings.Contains(r.body, `"enabled":true`) || !strings.Contains(r.body, `"active":false`) {
		t.Errorf("GET consume-pause = %d %s, want 200 enabled and inactive", r.status, r.body)
	}
	for _, path := range []string{"/api/v1/debug/consume-pause", "/api/v1/debug/consume-resume"} {
		r := do(t, "POST", on.uiURL+path, `{"duration_seconds":60}`)
		if r.status != 503 || !strings.Contains(r.body, "consumer_not_running") {
			t.Errorf("POST %s without a Kafka source = %d %s, want 503 consumer_not_running", path, r.status, r.body)
		}
	}
	off := startStack(t, testConfig(t, "/bin/cat"))
	if r := do(t, "GET", off.uiURL+"/api/v1/debug/consume-pause", ""); r.status != 200 || !strings.Contains(r.body, `"enabled":false`) {
		t.Errorf("GET consume-pause (disabled) = %d %s, want 200 with enabled false", r.status, r.body)
	}
	if r := do(t, "POST", off.uiURL+"/api/v1/debug/consume-pause", `{"duration_seconds":60}`); r.status != 403 || !strings.Contains(r.body, "ui.consume_pause.enabled") {
		t.Errorf("POST consume-pause (disabled) = %d %s, want 403 naming the key", r.status, r.body)
	}
}

// TestMetricsExistFromStartup: the counters dashboards and alerts use are
// there at 0 before the first event.
func TestMetricsExistFromStartup(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, "/bin/cat")
	cfg.Sources.HTTP.SinksEnabled = true
	cfg.Sinks.Kafka = []config.KafkaSink{{Name: "out", Topic: "out", Brokers: []string{"127.0.0.1:1"}}}
	cfg.DLQ.Topic, cfg.DLQ.Brokers = "dead", []string{"127.0.0.1:1"}
	s := startStack(t, cfg)
	text := workertest.Gather(t, s.reg)
	for _, want := range []string{
		`svc_arrange_errors_total{source="http"} 0`, `svc_arrange_errors_total{source="kafka"} 0`,
		`svc_complete_errors_total{source="http"} 0`,
		`svc_sink_breaker_transitions_total{sink="out",to="open"} 0`,
		`svc_sink_delivery_failures_total{sink="out"} 0`, `svc_sink_delivered_total{sink="out"} 0`,
		`svc_dlq_records_total{outcome="sent"} 0`, `svc_dlq_records_total{outcome="failed"} 0`,
		`svc_dlq_unconfigured_drops_total 0`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

// Probes are not traffic: a failing probe counts in svc_probe_tasks_total,
// never in svc_tasks_total (what failure-rate alerts and the Dashboard read)
// nor in the task duration; an ingress task still counts there.
func TestProbesAreNotTraffic(t *testing.T) {
	t.Parallel()
	s := startStack(t, testConfig(t, script(t, `cat >/dev/null; echo probed; exit 1`)))
	if r := do(t, "POST", s.uiURL+"/api/v1/debug/probe", `{"payload":"x"}`); r.status != 200 {
		t.Fatalf("probe = %d %s", r.status, r.body)
	}
	do(t, "POST", s.inURL+"/v1/process", `y`)
	text := workertest.Gather(t, s.reg)
	for _, want := range []string{
		`svc_probe_tasks_total{status="failed"} 1`,
		`svc_tasks_total{source="http",status="failed"} 1`,
		`svc_task_duration_seconds_count{source="http"} 1`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	for _, line := range strings.Split(text, "\n") {
		if strings.Contains(line, `source="probe"`) && (strings.HasPrefix(line, "svc_tasks_total") || strings.HasPrefix(line, "svc_task_duration_seconds")) {
			t.Errorf("a probe moved a traffic series: %s", line)
		}
	}
}
