package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"svc/worker/workertest"
	"svc/worker/workertest/wait"
)

// featureWorker is one `svc run` process of TestFeatureSwitchesWiredInRun.
type featureWorker struct {
	t    *testing.T
	p    *workertest.Proc
	base string // the UI server's URL
	in   string // the ingress's URL ("" without it)
}

const featureToken = "feature-token-0123456789"

// do sends one request to the worker's UI server with the token and
// returns the status and body.
func (w *featureWorker) do(method, path, body string) (int, string) {
	w.t.Helper()
	req, err := http.NewRequest(method, w.base+path, strings.NewReader(body))
	if err != nil {
		w.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+featureToken)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	r, err := http.DefaultClient.Do(req)
	if err != nil {
		w.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer r.Body.Close()
	b, _ := io.ReadAll(r.Body)
	return r.StatusCode, string(b)
}

// want fails unless the request answers status.
func (w *featureWorker) want(method, path, body string, status int) string {
	w.t.Helper()
	got, b := w.do(method, path, body)
	if got != status {
		w.t.Fatalf("%s %s = %d %s, want %d\nworker output:\n%s", method, path, got, b, status, workertest.Tail(w.p.Output.String(), 40))
	}
	return b
}

// ndjson splits an NDJSON answer into objects.
func ndjson(t *testing.T, body string) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("NDJSON line %q: %v", sc.Text(), err)
		}
		out = append(out, m)
	}
	return out
}

// TestFeatureSwitchesWiredInRun starts the real binary once per feature
// switch and proves each with one real request, so a feature the builder
// does not wire fails here even when its package tests pass; identity
// must advertise exactly what was wired (DLQ redrive once answered 409 in
// `svc run` while identity said "redrive": true).
func TestFeatureSwitchesWiredInRun(t *testing.T) {
	t.Parallel()
	topics := []string{"out"}
	for _, n := range []string{"redrive", "pause", "read"} {
		topics = append(topics, "in-"+n, "in-"+n+"_dlq")
	}
	brokers := workertest.Cluster(t, 1, topics).ListenAddrs()
	exe := filepath.Join(t.TempDir(), "exec.sh")
	script := "#!/bin/sh\nin=$(cat)\ncase \"$in\" in *fail*) echo 'still failing' >&2; exit 1;; esac\nprintf 'ok:%s' \"$in\"\n"
	if err := os.WriteFile(exe, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		feature string // the identity feature it switches on
		kafka   bool   // with the Kafka source on topic in-<name>
		toml    string
		check   func(t *testing.T, w *featureWorker)
	}{
		// ui.redrive_enabled: startFeatureWorker sets it for this name.
		{name: "redrive", feature: "redrive", kafka: true, check: checkRedrive},
		{name: "pause", feature: "consume_pause", kafka: true, toml: "[ui.consume_pause]\nenabled = true\n", check: func(t *testing.T, w *featureWorker) {
			var st struct{ Active bool }
			b := w.want("POST", "/api/v1/debug/consume-pause", `{"duration_seconds":15}`, 200)
			if json.Unmarshal([]byte(b), &st) != nil || !st.Active {
				t.Errorf("consume-pause = %s, want active", b)
			}
		}},
		{name: "read", feature: "kafka_read", kafka: true, check: func(t *testing.T, w *featureWorker) {
			if b := w.want("GET", "/api/v1/debug/kafka/topics", "", 200); !strings.Contains(b, `"alias":"source"`) {
				t.Errorf("topics = %s, want the source alias", b)
			}
		}},
		{name: "probe", feature: "probe", check: func(t *testing.T, w *featureWorker) {
			if b := w.want("POST", "/api/v1/debug/probe", `{"payload":"hi"}`, 200); !strings.Contains(b, `"output":"ok:hi"`) {
				t.Errorf("probe = %s, want the executor's output ok:hi", b)
			}
		}},
		{name: "cache", feature: "cache", toml: "[cache]\nenabled = true\n", check: func(t *testing.T, w *featureWorker) {
			w.want("GET", "/api/v1/debug/cache", "", 200)
		}},
		{name: "fleet", feature: "fleet", check: func(t *testing.T, w *featureWorker) {
			b := w.want("GET", "/api/v1/fleet/workers", "", 200)
			if !strings.Contains(b, `"name":"feature-fleet"`) || !strings.Contains(b, `"self":true`) {
				t.Errorf("fleet workers = %s, want this worker listed as self", b)
			}
		}},
		{name: "runtime", feature: "runtime_health", check: func(t *testing.T, w *featureWorker) {
			// The monitor runs: it takes samples.
			wait.For(t, wait.Long, "a runtime sample", func() (bool, string) {
				var rt struct {
					Enabled bool
					Current *struct{ Goroutines int }
				}
				b := w.want("GET", "/api/v1/debug/runtime", "", 200)
				return json.Unmarshal([]byte(b), &rt) == nil && rt.Enabled && rt.Current != nil && rt.Current.Goroutines > 0, b
			})
		}},
		{name: "throughput", feature: "throughput", toml: "[throughput]\ncost_label = \"cost\"\n", check: func(t *testing.T, w *featureWorker) {
			if b := w.want("GET", "/api/v1/debug/throughput", "", 200); !strings.Contains(b, `"enabled":true`) {
				t.Errorf("throughput = %s, want enabled", b)
			}
		}},
		{name: "release", feature: "ui_release", check: func(t *testing.T, w *featureWorker) {
			if b := w.want("GET", "/?token="+featureToken, "", 200); !strings.Contains(b, "app.js") {
				t.Errorf("GET / = %s, want the UI shell", b)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			extra := c.toml
			if c.kafka {
				extra += fmt.Sprintf("[sources.kafka]\nenabled = true\nbrokers = [%q]\ntopic = \"in-%s\"\ngroup = \"g-%s\"\n"+
					"startup_align_enabled = false\ncommit_interval = \"200ms\"\n"+
					"client_config = { \"metadata.max.age.ms\" = \"1000\" }\n[[sinks.kafka]]\nname = \"out\"\ntopic = \"out\"\n",
					brokers[0], c.name, c.name)
			}
			w := startFeatureWorker(t, "feature-"+c.name, exe, extra)
			if c.kafka { // the consumer joined its group
				wait.For(t, wait.Long, "/readyz", func() (bool, string) {
					code, b := w.do("GET", "/readyz", "")
					return code == 200, b
				})
			}
			var id struct{ Features map[string]bool }
			if b := w.want("GET", "/api/v1/identity", "", 200); json.Unmarshal([]byte(b), &id) != nil || !id.Features[c.feature] {
				t.Fatalf("identity = %s, want features.%s true", b, c.feature)
			}
			if c.feature != "redrive" && id.Features["redrive"] {
				t.Errorf("identity advertises redrive without ui.redrive_enabled: %v", id.Features)
			}
			c.check(t, w)
		})
	}
	t.Run("ui_disabled", func(t *testing.T) {
		t.Parallel()
		w := startFeatureWorker(t, "feature-noui", exe, "")
		// The ingress serves; the UI port and its probes are gone.
		wait.For(t, wait.Long, "the ingress answers", func() (bool, string) {
			r, err := http.Post(w.in+"/v1/process", "text/plain", strings.NewReader("x"))
			if err != nil {
				return false, err.Error()
			}
			r.Body.Close()
			return r.StatusCode == 200, r.Status
		})
		if r, err := http.Get(w.base + "/healthz"); err == nil {
			r.Body.Close()
			t.Errorf("/healthz answered %d with ui.enabled = false, want no UI server", r.StatusCode)
		}
		if !strings.Contains(w.p.Output.String(), `"msg":"ui_disabled_no_probes"`) {
			t.Errorf("log lacks ui_disabled_no_probes:\n%s", w.p.Output.String())
		}
	})
}

// startFeatureWorker runs `svc run` with a token-protected UI, an
// HTTP-only ingress running exe, storage in a temp folder, and extra TOML
// appended; name feature-noui turns the UI off, feature-redrive turns
// ui.redrive_enabled on (the [ui] table is written here). It returns once the worker
// answers (the UI's /healthz, or its ingress without a UI).
func startFeatureWorker(t *testing.T, name, exe, extra string) *featureWorker {
	t.Helper()
	dir := t.TempDir()
	uiPort, inPort := freePort(t), freePort(t)
	uiOn := name != "feature-noui"
	cfg := workertest.WriteConfig(t, fmt.Sprintf(`
[worker]
name = %q
shutdown_timeout = "5s"
[metrics]
enabled = false
[ui]
enabled = %v
port = %d
auth_token = %q
redrive_enabled = %v
[ui.release]
cache_dir = %q
[storage]
dir = %q
[shared]
dir = %q
[executor]
binary_path = %q
[handler]
max_attempts = 1
[sources.http]
enabled = true
host = "127.0.0.1"
port = %d
`, name, uiOn, uiPort, featureToken, name == "feature-redrive", filepath.Join(dir, "ui-cache"), filepath.Join(dir, "storage"), filepath.Join(dir, "shared"), exe, inPort)+extra)
	w := &featureWorker{t: t, p: start(t, "run", "-config", cfg), base: fmt.Sprintf("http://127.0.0.1:%d", uiPort), in: fmt.Sprintf("http://127.0.0.1:%d", inPort)}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("output of %s:\n%s", name, workertest.Tail(w.p.Output.String(), 60))
		}
	})
	if uiOn {
		w.p.WaitHTTP(t, w.base+"/healthz")
	} else {
		w.p.WaitHTTP(t, w.in+"/")
	}
	return w
}

// checkRedrive: a failing message reaches the DLQ; a dry run answers one
// NDJSON line for it and a summary; a real redrive re-produces it to the
// source topic, where the worker consumes it again (it fails again: a
// second DLQ record).
func checkRedrive(t *testing.T, w *featureWorker) {
	var brokers []string
	var cfg struct {
		Sources struct {
			Kafka struct{ Brokers []string }
		}
	}
	if b := w.want("GET", "/api/v1/config", "", 200); json.Unmarshal([]byte(b), &cfg) != nil {
		t.Fatalf("config = %s", b)
	}
	brokers = cfg.Sources.Kafka.Brokers
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(t.Context(), &kgo.Record{Topic: "in-redrive", Key: []byte("k1"), Value: []byte("please fail")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	dlq := func() []map[string]any {
		_, b := w.do("GET", "/api/v1/debug/kafka/dlq/messages?from_ts=0&limit=10", "")
		var recs []map[string]any
		for _, l := range ndjson(t, b) {
			if _, ok := l["offset"]; ok {
				recs = append(recs, l)
			}
		}
		return recs
	}
	wait.For(t, wait.Long, "the failing message in the DLQ", func() (bool, string) {
		n := len(dlq())
		return n == 1, fmt.Sprint(n, " DLQ records")
	})
	lines := ndjson(t, w.want("POST", "/api/v1/debug/dlq/redrive", `{"from_ts":0}`, 200))
	if len(lines) != 2 || lines[0]["outcome"] != "would_fail" || lines[1]["summary"] == nil {
		t.Fatalf("dry run = %v, want one would_fail line and a summary", lines)
	}
	if sum := lines[1]["summary"].(map[string]any); sum["dry_run"] != true || sum["records"] != 1.0 {
		t.Errorf("dry run summary = %v", sum)
	}
	lines = ndjson(t, w.want("POST", "/api/v1/debug/dlq/redrive", `{"from_ts":0,"dry_run":false}`, 200))
	if len(lines) != 2 || lines[0]["outcome"] != "redriven" || lines[1]["summary"].(map[string]any)["redriven"] != 1.0 {
		t.Fatalf("redrive = %v, want one redriven line and a summary", lines)
	}
	start := time.Now()
	wait.For(t, wait.Long, "the redriven message consumed again (a second DLQ record)", func() (bool, string) {
		n := len(dlq())
		return n == 2, fmt.Sprint(n, " DLQ records after ", time.Since(start).Round(time.Millisecond))
	})
}
