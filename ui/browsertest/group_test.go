package browsertest

import (
	"context"
	"encoding/json"
	"fmt"
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

// gatedExecutor fails every first attempt and holds every later one while
// the file GATE exists.
const gatedExecutor = `#!/bin/sh
in=$(cat)
[ "$SVC_ATTEMPT" = 1 ] && exit 1
while [ -e "GATE" ]; do sleep 0.1; done
echo '{"done":true}'
`

// defaultKafkaWorker runs kfake (topic "orders", 2 partitions) and a
// Kafka worker on a default config (no consume pause, every other UI key
// at its default) whose executor fails every first attempt and holds every
// later one while the file gate exists. Its pool has 8 children, so the
// six held tasks (one of partition 0's key, partition 1's five keys) all
// run their second attempts: with the default
// (one per CPU) on 2 cores, partition 1's five keys took both children and
// stuck-key's second attempt waited for a child for as long as the gate
// held (CI, stop 44).
func defaultKafkaWorker(t *testing.T) (w *uiWorker, cl *kgo.Client, gate string) {
	t.Helper()
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "orders", "orders-out", "orders_dlq"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	dir := t.TempDir()
	gate = filepath.Join(dir, "gate")
	exe := filepath.Join(dir, "executor.sh")
	if err := os.WriteFile(exe, []byte(strings.ReplaceAll(gatedExecutor, "GATE", gate)), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	port := workertest.FreePort(t)
	cfg := workertest.WriteConfig(t, fmt.Sprintf(`
[worker]
name = "orders-1"
shutdown_timeout = "2s"
[metrics]
enabled = false
[ui]
port = %d
auth_token = %q
[ui.release]
cache_dir = %q
[storage]
dir = %q
[executor]
binary_path = %q
timeout = "5m"
pool_size = 8
[sources.kafka]
enabled = true
brokers = [%q]
topic = "orders"
group = "svc-lag"
startup_align_enabled = false
[[sinks.kafka]]
name = "results"
topic = "orders-out"
`, port, browserToken, filepath.Join(dir, "ui-cache"), filepath.Join(dir, "storage"), exe, cluster.ListenAddrs()[0]))
	w = &uiWorker{base: fmt.Sprintf("http://127.0.0.1:%d", port), token: browserToken}
	w.proc = start(t, "run", "-config", cfg)
	w.proc.WaitHTTP(t, w.base+"/healthz")
	wait.For(t, wait.Long, "the consumer group joined (readyz)", func() (bool, string) {
		c, body := w.get(t, "/readyz")
		return c == 200, fmt.Sprintf("readyz %d %s", c, body)
	})
	cl, err = kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.DefaultProduceTopic("orders"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return w, cl, gate
}

// TestGroupLagView walks issue 41's first two items on a worker with a
// default config: the Dashboard's Consumer lag tile says how far behind in
// time the group is and links, in one click, to the Consumer lag page:
// every partition with its committed offset, high watermark, lag, how old
// its oldest unconsumed message is, where its lag is going (not consuming
// while the executor holds every task) and a sparkline of its lag; once
// the executor lets go, the lag and the lag in time fall to 0 and the
// partitions are caught up. Partition 0's messages share one key, so the
// page names that key as holding the partition (its running task linked,
// at attempt 2 since the executor failed the first, 4 messages behind it,
// the commit waiting for it); the task's link opens Live with the task's
// panel showing it running (attempt 2, its trace so far: received,
// started) rather than "not among the recent tasks". svc_consumer_lag_seconds
// says the same. No console error on any page.
func TestGroupLagView(t *testing.T) {
	bin := chromiumOrSkip(t)
	dir := shots(t)
	b := startBrowser(t, bin)
	w, cl, gate := defaultKafkaWorker(t)

	// Five messages on each partition, produced three minutes ago as
	// their timestamps say; the first of each runs and is held, the others
	// wait: nothing is committed.
	old := time.Now().Add(-3 * time.Minute)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for p := range int32(2) {
		for i := range 5 {
			key := fmt.Sprintf("k-%d-%d", p, i)
			if p == 0 {
				key = "stuck-key" // one lane: its first message runs, 4 wait behind it
			}
			rec := &kgo.Record{Partition: p, Key: []byte(key), Value: []byte(fmt.Sprintf(`{"i":%d}`, i)), Timestamp: old.Add(time.Duration(i) * time.Second)}
			if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}

	dash := openWithToken(t, b, w.base+"/")
	dash.viewport(1280, 800)
	dash.waitFor(`document.querySelector(".lag-tile .big[data-lag='10']") && Number(document.querySelector(".lag-tile .lag-seconds").dataset.lagSeconds) >= 170`,
		"the Consumer lag tile at 10 messages, about 3 minutes behind")
	if s := dash.str(`document.querySelector(".lag-tile").innerText`); !strings.Contains(s, "3 min behind") {
		t.Errorf("the lag tile says %q, want it 3 min behind", s)
	}
	if n := dash.str(`String(document.querySelectorAll("a[href^='/debug?tab=pause']").length)`); n != "0" {
		t.Errorf("%s links to the Pause tab on a default config (no consume pause)", n)
	}
	dash.waitFor(`document.querySelector(".lag-tile [data-drain=not_consuming]")`, "the tile saying the group is not consuming")
	dash.screenshot(dir, "lag-dashboard-time")

	// One click from the tile.
	dash.click(".lag-tile a.per-partition", "per partition")
	dash.waitFor(`location.pathname === "/lag" && document.querySelectorAll("table.lag-table tbody tr").length === 2`, "the Consumer lag page with both partitions")
	if s := dash.str(`document.querySelector("h1").textContent`); s != "Consumer lag" {
		t.Errorf("page title = %q", s)
	}
	dash.waitFor(`[...document.querySelectorAll("table.lag-table tbody tr")].every((r) => r.dataset.lag === "5" && Number(r.dataset.lagSeconds) >= 170 &&
		r.querySelector("td.behind").textContent === "3 min behind" && r.querySelector("[data-drain=not_consuming]") &&
		Number(r.querySelector("svg.lag-spark").dataset.n) >= 2 && r.dataset.state === "flowing")`,
		"each partition 5 messages and 3 min behind, not consuming, with a sparkline of two reads or more")
	cells := dash.str(`[...document.querySelector("table.lag-table tbody tr").children].map((c) => c.innerText.trim()).join(" | ")`)
	for _, want := range []string{"orders-1 (this worker)", "none", "5 msgs"} {
		if !strings.Contains(cells, want) {
			t.Errorf("first row %q lacks %q", cells, want)
		}
	}
	// Which key holds partition 0: stuck-key, its running task, 4 behind.
	dash.waitFor(`(() => { const k = document.querySelector("table.lag-table tr[data-partition='0'] .held-key");
		return k && k.dataset.key === "stuck-key" && k.dataset.behind === "4" && k.dataset.attempt === "2" && k.querySelector("a.task-link") &&
			k.innerText.includes("running") && k.innerText.includes("attempt 2") && k.innerText.includes("the commit waits for it"); })()`,
		"stuck-key named as holding partition 0, running at attempt 2, 4 behind, the commit waiting for it")
	var hol struct {
		Parts []struct {
			HeadOfLine struct {
				Keys []struct {
					TaskIDs []string `json:"task_ids"`
				} `json:"keys"`
			} `json:"head_of_line"`
		} `json:"group_partitions"`
	}
	_, body := w.get(t, "/api/v1/debug/kafka/group")
	if err := json.Unmarshal([]byte(body), &hol); err != nil || len(hol.Parts) != 2 || len(hol.Parts[0].HeadOfLine.Keys) == 0 || len(hol.Parts[0].HeadOfLine.Keys[0].TaskIDs) != 1 {
		t.Fatalf("group view = %v %s", err, body)
	}
	task := hol.Parts[0].HeadOfLine.Keys[0].TaskIDs[0]
	if href := dash.str(`document.querySelector("table.lag-table tr[data-partition='0'] .held-key a.task-link").getAttribute("href")`); href != "/live?task="+task {
		t.Errorf("the held key's task link = %s, want /live?task=%s", href, task)
	}
	if v := metricSum(t, w, "svc_consumer_lag_seconds", nil); v < 2*170 {
		t.Errorf("svc_consumer_lag_seconds summed = %v, want about 180 for each of the 2 partitions", v)
	}
	dash.screenshot(dir, "lag-view")

	// The held key's task opens on Live, shown as running: what is known
	// so far rather than "not among the recent tasks".
	wait.For(t, wait.Long, "the held task's trace has its received and started events", func() (bool, string) {
		_, body := w.get(t, "/api/v1/debug/trace?task_id="+task)
		return strings.Contains(body, `"task_received"`) && strings.Contains(body, `"executor_started"`), body
	})
	dash.click("table.lag-table tr[data-partition='0'] .held-key a.task-link", task)
	dash.waitFor(`location.pathname === "/live" && document.querySelector("#detail-panel[data-running] .timeline")`, "Live's panel of the running task with its trace so far")
	live := dash.str(`document.querySelector("#detail-panel").innerText`)
	for _, want := range []string{"Task " + task, "running", "Attempt\n2", "stuck-key", "Still running", "task_received", "executor_started"} {
		if !strings.Contains(live, want) {
			t.Errorf("Live's panel of the running task lacks %q:\n%s", want, live)
		}
	}
	if strings.Contains(dash.text(), "not among the recent tasks") {
		t.Errorf("Live says the running task is not among the recent tasks:\n%s", dash.text())
	}
	dash.screenshot(dir, "live-running-task")
	checkPage(t, dash, false)
	dash.click("nav a[href='/lag']", "Lag")
	dash.waitFor(`location.pathname === "/lag" && document.querySelectorAll("table.lag-table tbody tr").length === 2`, "back on the Consumer lag page")

	// The executor lets go: everything is consumed and committed.
	if err := os.Remove(gate); err != nil {
		t.Fatal(err)
	}
	dash.waitFor(`[...document.querySelectorAll("table.lag-table tbody tr")].every((r) => r.dataset.lag === "0" && r.dataset.lagSeconds === "0" &&
		r.querySelector("td.behind").textContent === "up to date" && r.querySelector("[data-drain=caught_up]") && !r.querySelector(".held-key"))`,
		"both partitions at lag 0, up to date, caught up, no key holding")
	if s := dash.str(`document.querySelector(".lag-total").innerText`); !strings.Contains(s, "Total lag 0 msgs") || !strings.Contains(s, "up to date") || !strings.Contains(s, "caught up") {
		t.Errorf("total line = %q", s)
	}
	checkPage(t, dash, false)
	if *updateShots {
		for _, name := range []string{"lag-view", "lag-dashboard-time", "live-running-task"} {
			data, err := os.ReadFile(filepath.Join(dir, name+".png"))
			if err == nil {
				err = os.WriteFile(filepath.Join(docsScreenshots, name+".png"), data, 0o600)
			}
			if err != nil {
				t.Errorf("update screenshot %s: %v", name, err)
			}
		}
	}
}
