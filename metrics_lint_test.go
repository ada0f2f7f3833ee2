package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	"github.com/twmb/franz-go/pkg/kgo"

	"svc/worker/workertest"
	"svc/worker/workertest/wait"
)

// TestMetricsLintClean scrapes /metrics of a real worker with every part
// that exports metrics switched on (Kafka source, sink, DLQ, HTTP
// ingress, cache, task cost, runtime monitor, recorder) after it did
// some work, and lints the whole page with client_golang's promlint, the
// checks Prometheus tooling applies: any problem fails.
func TestMetricsLintClean(t *testing.T) {
	t.Parallel()
	cluster := workertest.Cluster(t, 2, []string{"lint-in", "lint-out", "lint-in_dlq"})
	dir := t.TempDir()
	exe := filepath.Join(dir, "exec.sh")
	script := "#!/bin/sh\nin=$(cat)\ncase \"$in\" in *fail*) echo no >&2; exit 1;; esac\necho \"$in\"\n"
	if err := os.WriteFile(exe, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	ui, in, mt := freePort(t), freePort(t), freePort(t)
	cfg := workertest.WriteConfig(t, fmt.Sprintf(`
[worker]
name = "lint-1"
shutdown_timeout = "5s"
[metrics]
host = "127.0.0.1"
port = %d
[ui]
port = %d
[storage]
dir = %q
[shared]
dir = %q
[cache]
enabled = true
[executor]
binary_path = %q
pool_size = 2
[handler]
max_attempts = 1
[sources.http]
enabled = true
host = "127.0.0.1"
port = %d
[sources.kafka]
enabled = true
brokers = [%q]
topic = "lint-in"
group = "svc-lint"
startup_align_enabled = false
commit_interval = "500ms"
[[sinks.kafka]]
name = "out"
topic = "lint-out"
[throughput]
cost_label = "cost"
`, mt, ui, filepath.Join(dir, "storage"), filepath.Join(dir, "shared"), exe, in, cluster.ListenAddrs()[0]))
	p := start(t, "run", "-config", cfg)
	base := fmt.Sprintf("http://127.0.0.1:%d", ui)
	p.WaitHTTP(t, base+"/healthz")
	wait.For(t, wait.Long, "the worker ready (group joined)", func() (bool, string) {
		r, err := http.Get(base + "/readyz")
		if err != nil {
			return false, err.Error()
		}
		r.Body.Close()
		return r.StatusCode == 200, r.Status
	})

	// Work of every kind, so labelled series and histograms have samples.
	cl, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.DefaultProduceTopic("lint-in"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for i, v := range []string{"ok 1", "ok 2", "please fail"} {
		rec := &kgo.Record{Key: []byte(fmt.Sprint(i)), Value: []byte(v), Headers: []kgo.RecordHeader{{Key: "svc-label-cost", Value: []byte("3")}}}
		if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	for _, body := range []string{"ok http", "fail http"} {
		req, _ := http.NewRequest("POST", fmt.Sprintf("http://127.0.0.1:%d/v1/process", in), strings.NewReader(body))
		req.Header.Set("X-Svc-Label-Cost", "2")
		r, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
	}
	var page string
	wait.For(t, wait.Long, "the Kafka tasks finished, a DLQ record sent and a runtime sample taken", func() (bool, string) {
		r, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", mt))
		if err != nil {
			return false, err.Error()
		}
		b, _ := io.ReadAll(r.Body)
		r.Body.Close()
		page = string(b)
		return strings.Contains(page, `svc_dlq_records_total{outcome="sent"} 1`) &&
			strings.Contains(page, "svc_runtime_goroutines ") && strings.Contains(page, `svc_tasks_total{source="kafka",status="ok"} 2`), workertest.Tail(page, 20)
	})

	problems, err := promlint.New(strings.NewReader(page)).Lint()
	if err != nil {
		t.Fatalf("promlint could not parse /metrics: %v", err)
	}
	for _, pr := range problems {
		t.Errorf("promlint: %s: %s", pr.Metric, pr.Text)
	}
	// And every svc_ family has its row in docs/operations.md's metrics
	// table, so an operator can look up whatever a scrape shows.
	doc, err := os.ReadFile("docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, _ := strings.Cut(string(doc), "\n## Metrics\n")
	table, _, _ = strings.Cut(table, "\n## ")
	for _, line := range strings.Split(page, "\n") {
		name, ok := strings.CutPrefix(line, "# TYPE ")
		name, _, _ = strings.Cut(name, " ")
		if ok && strings.HasPrefix(name, "svc_") && !strings.Contains(table, "`"+name+"`") {
			t.Errorf("docs/operations.md's metrics table lacks %s", name)
		}
	}
	families := strings.Count(page, "\n# TYPE ")
	if families < 60 {
		t.Errorf("/metrics has %d families, want the worker's whole set (60 or more):\n%s", families, page)
	}
	t.Logf("linted %d metric families, %d bytes", families, len(page))
}
