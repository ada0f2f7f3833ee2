package browsertest

// The workers the browser tests drive (real svc processes: Kafka from
// kfake in this process, a shell script as the executor, the flight
// recorder on disk) and the checks every page gets.

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"svc/worker/workertest"
	"svc/worker/workertest/wait"
)

var updateShots = flag.Bool("update-screenshots", false, "copy the browser tests' screenshots into docs/screenshots")

// docsScreenshots is docs/screenshots seen from this package's folder, the
// working directory of its tests.
const docsScreenshots = "../../docs/screenshots"

const browserToken = "tok-browser-0123456789"

// executorScript fails messages that contain "fail" (stderr, exit 1) and
// answers others with JSON the probe details describe, writing one
// annotation to fd 3 either way.
const executorScript = `#!/bin/sh
in=$(cat)
case "$in" in
*fail*)
  echo '{"annotation":{"kind":"order.failed","payload":{"reason":"rejected"}}}' >&3
  echo "order rejected: payment declined for $SVC_KEY" >&2
  exit 1;;
esac
echo '{"annotation":{"kind":"order.created","payload":{"order_id":"A/1 b","status":"paid","amount_cents":1234567,"amount_plain":1234567,"took_ms":83450,"size":1536,"created":"2024-05-01T12:34:56.789Z","customer":"acme","note":"explode me"}}}' >&3
printf '{"summary":"accepted %s","state":"accepted","raw_size":2048,"lines":[{"sku":"a/1 x","qty":2},{"sku":"b-2","qty":1}],"rules":[{"rule":"root","matched":true,"took_ms":5,"children":[{"rule":"child","matched":false,"took_ms":1}]}]}\n' "$SVC_TASK_ID"
`

// renderersModule is ui.custom_renderers_path: one renderer that works,
// one that throws.
const renderersModule = `export default {
  money(value) { const s = document.createElement("span"); s.className = "money"; s.textContent = "$" + (value / 100).toFixed(2); return s; },
  explode() { throw new Error("renderer bug"); },
};
`

const showcasePage = `
[[handler.ui_pages]]
slug = "showcase"
title = "Showcase"
  [[handler.ui_pages.widgets]]
  title = "Orders"
  view = "table"
  source = { kind = "annotations", kind_prefix = "order.created", limit = 50 }
    [[handler.ui_pages.widgets.columns]]
    name = "order_id"
    label = "Order"
    link_template = "{shop}/orders/{value}"
    hint = "customer {row.customer}"
    [[handler.ui_pages.widgets.columns]]
    name = "status"
    badge_colors = { paid = "green", refunded = "yellow", failed = "red", "*" = "gray" }
    [[handler.ui_pages.widgets.columns]]
    name = "amount_cents"
    label = "Amount"
    renderer = "money"
    [[handler.ui_pages.widgets.columns]]
    name = "amount_plain"
    format = "number"
    [[handler.ui_pages.widgets.columns]]
    name = "took_ms"
    format = "duration_ms"
    [[handler.ui_pages.widgets.columns]]
    name = "size"
    format = "bytes"
    [[handler.ui_pages.widgets.columns]]
    name = "created"
    format = "timestamp"
    [[handler.ui_pages.widgets.columns]]
    name = "customer"
    link_template = "{wiki}/customers/{value}"
    [[handler.ui_pages.widgets.columns]]
    name = "note"
    renderer = "explode"
    [[handler.ui_pages.widgets.columns]]
    name = "kind"
    link_template = "{shop}/kinds/{row.missing_field}"
  [[handler.ui_pages.widgets]]
  title = "Last order"
  view = "keyvalue"
  source = { kind = "annotations", kind_prefix = "order.created" }
  [[handler.ui_pages.widgets]]
  title = "Last task outcome"
  view = "string"
  field = "status"
  source = { kind = "tasks", limit = 10 }
  [[handler.ui_pages.widgets]]
  title = "Last order state"
  view = "badge"
  field = "status"
  badge_colors = { paid = "green", failed = "red" }
  source = { kind = "annotations", kind_prefix = "order." }
  [[handler.ui_pages.widgets]]
  title = "Tasks processed"
  view = "stat"
  format = "number"
  source = { kind = "metrics", metric = "svc_tasks_total" }
  [[handler.ui_pages.widgets]]
  title = "Dead letters"
  view = "table"
  columns = [{ name = "task_id" }, { name = "ts_ms", label = "When", format = "timestamp" }]
  source = { kind = "events", event_types = ["dlq_sent"] }
  [[handler.ui_pages.widgets]]
  title = "Heat map"
  view = "heatmap"
  source = { kind = "tasks" }
  [[handler.ui_pages.widgets]]
  title = "Traces"
  view = "table"
  columns = ["a"]
  source = { kind = "traces" }

[[handler.probe_details.fields]]
name = "summary"
view = "string"
hint = "{value}"
[[handler.probe_details.fields]]
name = "state"
view = "badge"
badge_colors = { accepted = "green", rejected = "red" }
[[handler.probe_details.fields]]
name = "raw_size"
view = "string"
format = "bytes"
[[handler.probe_details.fields]]
name = "lines"
view = "table"
row_fields = ["sku", "qty"]
  [[handler.probe_details.fields.columns]]
  name = "sku"
  link_template = "{shop}/products/{value}"
  [[handler.probe_details.fields.columns]]
  name = "qty"
[[handler.probe_details.fields]]
name = "rules"
view = "tree"
row_fields = ["rule", "matched", "took_ms"]
  [[handler.probe_details.fields.columns]]
  name = "rule"
  [[handler.probe_details.fields.columns]]
  name = "matched"
  badge_colors = { "true" = "green", "false" = "gray" }
  [[handler.probe_details.fields.columns]]
  name = "took_ms"
  format = "duration_ms"
`

// uiWorker is a running worker as the browser sees it.
type uiWorker struct {
	base    string // http://127.0.0.1:port
	ingress string // http://127.0.0.1:port of the HTTP ingress, if on
	token   string
	proc    *workertest.Proc
}

// get GETs an API path with the worker's token.
func (w *uiWorker) get(t *testing.T, path string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", w.base+path, nil)
	if w.token != "" {
		req.Header.Set("Authorization", "Bearer "+w.token)
	}
	r, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer r.Body.Close()
	b, _ := io.ReadAll(r.Body)
	return r.StatusCode, string(b)
}

// startKafkaWorker runs kfake and a Kafka worker with every UI feature on
// and a UI token, then feeds it ok and failing orders and waits until the
// failures reached the DLQ.
func startKafkaWorker(t *testing.T) *uiWorker {
	t.Helper()
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "orders", "orders-out", "orders_dlq"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	dir := t.TempDir()
	exe := filepath.Join(dir, "executor.sh")
	renderers := filepath.Join(dir, "renderers.js")
	if err := os.WriteFile(exe, []byte(executorScript), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(renderers, []byte(renderersModule), 0o600); err != nil {
		t.Fatal(err)
	}
	port := workertest.FreePort(t)
	cfg := workertest.WriteConfig(t, fmt.Sprintf(`
[worker]
name = "orders-1"
cluster = "shop"
shutdown_timeout = "5s"
[metrics]
enabled = false
[ui]
port = %d
auth_token = %q
prometheus_url = "https://prom.example.com"
prometheus_worker_label = "instance"
custom_links = [{ label = "Runbook", url = "https://wiki.example.com/svc" }]
custom_renderers_path = %q
[ui.consume_pause]
enabled = true
[ui.release]
cache_dir = %q
[ui.link_bases]
shop = "https://shop.example.com/"
[storage]
dir = %q
[shared]
dir = %q
[executor]
binary_path = %q
pool_size = 2
timeout = "10s"
[handler]
max_attempts = 2
retry_backoff = "10ms"
label_fields = ["customer"]
[sources.kafka]
enabled = true
brokers = [%q]
topic = "orders"
group = "svc-browser"
startup_align_enabled = false
commit_interval = "1s"
delivery = "exactly_once"
[[sinks.kafka]]
name = "results"
topic = "orders-out"
[dlq]
send_timeout = "5s"
%s`, port, browserToken, renderers, filepath.Join(dir, "ui-cache"), filepath.Join(dir, "storage"), filepath.Join(dir, "shared"), exe, cluster.ListenAddrs()[0], showcasePage))
	w := &uiWorker{base: fmt.Sprintf("http://127.0.0.1:%d", port), token: browserToken}
	w.proc = start(t, "run", "-config", cfg)
	w.proc.WaitHTTP(t, w.base+"/healthz")
	wait.For(t, wait.Long, "the consumer group joined (readyz)", func() (bool, string) {
		c, body := w.get(t, "/readyz")
		return c == 200, fmt.Sprintf("readyz %d %s", c, body)
	})
	if !strings.Contains(w.proc.Output.String(), "probe_details_link_bases_missing") {
		t.Errorf("no probe_details_link_bases_missing warning for {wiki}:\n%s", w.proc.Output.String())
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.DefaultProduceTopic("orders"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for i := 1; i <= 8; i++ {
		body := fmt.Sprintf(`{"order":%d,"customer":"acme"}`, i)
		if i%4 == 0 {
			body = fmt.Sprintf(`{"order":%d,"customer":"initech","note":"please fail"}`, i)
		}
		rec := &kgo.Record{Key: []byte(fmt.Sprintf("customer-%d", i)), Value: []byte(body),
			Headers: []kgo.RecordHeader{{Key: "svc-label-origin", Value: []byte("browser-test")}}}
		if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	wait.For(t, wait.Long, "8 task results and 2 DLQ records", func() (bool, string) {
		_, tasks := w.get(t, "/api/v1/live/task-results?limit=50")
		_, dlq := w.get(t, "/api/v1/debug/kafka/dlq/messages?from_ts=0")
		nt, nd := strings.Count(tasks, `"task_id"`), strings.Count(dlq, "\n")
		return nt >= 8 && nd >= 2, fmt.Sprintf("%d task results, %d DLQ records", nt, nd)
	})
	return w
}

// startLockedDownWorker runs an HTTP-only worker with every kill switch
// off, no token and a memory-only recorder, with one request served.
func startLockedDownWorker(t *testing.T) *uiWorker {
	t.Helper()
	dir := t.TempDir()
	port, in := workertest.FreePort(t), workertest.FreePort(t)
	cfg := workertest.WriteConfig(t, fmt.Sprintf(`
[worker]
name = "locked-1"
shutdown_timeout = "5s"
[metrics]
enabled = false
[ui]
port = %d
probe_enabled = false
merge_enabled = false
kafka_read_enabled = false
[ui.release]
cache_dir = %q
[storage]
dir = ""
[executor]
binary_path = "/bin/cat"
[sources.http]
enabled = true
host = "127.0.0.1"
port = %d
`, port, filepath.Join(dir, "ui-cache"), in))
	w := &uiWorker{base: fmt.Sprintf("http://127.0.0.1:%d", port), ingress: fmt.Sprintf("http://127.0.0.1:%d", in)}
	w.proc = start(t, "run", "-config", cfg)
	w.proc.WaitHTTP(t, w.base+"/healthz")
	r, err := http.Post(w.ingress+"/v1/process", "application/json", strings.NewReader(`{"hello":"world"}`))
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	return w
}

// shots is where screenshots go: $SVC_SCREENSHOT_DIR, else a fixed folder
// under the temp dir, printed so CI logs say where.
func shots(t *testing.T) string {
	dir := os.Getenv("SVC_SCREENSHOT_DIR")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "svc-browser-screenshots")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return dir
}

// allowedNetworkErrors are the answers the UI provokes on purpose: routes
// of other releases it feature-detects by their 404.
var allowedNetworkErrors = []string{"/api/v1/fleet/workers", "/api/v1/debug/runtime", "/api/v1/debug/throughput"}

// checkPage fails on any console error or uncaught exception, except a
// feature-detection 404 (and the sign-in page's own 401 when allow401),
// and on a stray "null" or "undefined" shown as text.
func checkPage(t *testing.T, p *page, allow401 bool) {
	t.Helper()
	var stray bool
	if err := p.eval(`/^(null|undefined|\[object \w+\])$/m.test(document.body.innerText)`, &stray); err != nil || stray {
		t.Errorf("page shows a stray null/undefined/[object] (eval error %v):\n%s", err, p.text())
	}
	for _, m := range p.messages() {
		if m.Level != "error" {
			continue
		}
		if m.Source == "network" {
			ok := false
			for _, a := range allowedNetworkErrors {
				ok = ok || strings.Contains(m.URL, a) && strings.Contains(m.Text, "404")
			}
			if ok || allow401 && strings.Contains(m.Text, "401") {
				continue
			}
		}
		t.Errorf("console error (%s): %s %s", m.Source, m.Text, m.URL)
	}
}

// warnings returns the console warnings that contain s.
func warnings(p *page, s string) []string {
	var out []string
	for _, m := range p.messages() {
		if m.Level == "warning" && strings.Contains(m.Text, s) {
			out = append(out, m.Text)
		}
	}
	return out
}

// jsonOf evaluates expr (JSON-able data, or a promise of it) into out.
func jsonOf(t *testing.T, p *page, expr string, out any) {
	t.Helper()
	var s string
	if err := p.eval("Promise.resolve("+expr+").then((v) => JSON.stringify(v))", &s); err != nil {
		t.Fatalf("eval %s: %v", expr, err)
	}
	if err := json.Unmarshal([]byte(s), out); err != nil {
		t.Fatalf("decode %s: %v", s, err)
	}
}
