package browsertest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"svc/worker/workertest"
	"svc/worker/workertest/wait"
)

// heldExecutor holds every task until the marker file exists.
const heldExecutor = `#!/bin/sh
in=$(cat)
while [ ! -e "$HOLD_MARK" ]; do sleep 0.05; done
echo '{"done":true}'
`

// TestWorkersRunningNow runs two real workers of one consumer group on a
// 2-partition topic, sharing a folder and trusting each other, with an
// executor that holds its tasks on a marker file. The Workers page of one
// lists, under "Running now", the task each worker runs (its own and the
// peer's, which the worker asked with the token: the browser sends no
// request to the peer), with the alias, partition:offset, key, attempt and
// elapsed time; once the executor is released both lists empty, and once
// the peer stops it is named as not listed. No console error.
func TestWorkersRunningNow(t *testing.T) {
	bin := chromiumOrSkip(t)
	b := startBrowser(t, bin)
	cluster := workertest.Cluster(t, 2, []string{"jobs", "jobs-out", "jobs_dlq"})
	root := t.TempDir()
	exe := filepath.Join(root, "executor.sh")
	mark := filepath.Join(root, "release")
	if err := os.WriteFile(exe, []byte(heldExecutor), 0o700); err != nil {
		t.Fatal(err)
	}
	names := []string{"alpha", "beta"}
	ports := []int{workertest.FreePort(t), workertest.FreePort(t)}
	var origins []string
	for _, p := range ports {
		origins = append(origins, fmt.Sprintf("%q", fmt.Sprintf("http://127.0.0.1:%d", p)))
	}
	var ws []*uiWorker
	for i, name := range names {
		cfg := workertest.WriteConfig(t, fmt.Sprintf(`
[worker]
name = %q
cluster = "shop"
shutdown_timeout = "5s"
[metrics]
enabled = false
[ui]
port = %d
auth_token = %q
allowed_ws_origins = [%s]
[ui.release]
cache_dir = %q
[storage]
dir = %q
[shared]
dir = %q
[executor]
binary_path = %q
pool_size = 2
timeout = "60s"
env = { HOLD_MARK = %q }
[handler]
max_attempts = 1
[sources.kafka]
enabled = true
brokers = [%q]
topic = "jobs"
group = "svc-running"
startup_align_enabled = false
commit_interval = "500ms"
client_config = { "session.timeout.ms" = "2000", "heartbeat.interval.ms" = "500" }
[[sinks.kafka]]
name = "results"
topic = "jobs-out"
[fleet]
trusted_urls = [%s]
[fleet.registry]
heartbeat = "300ms"
`, name, ports[i], browserToken, strings.Join(origins, ", "), filepath.Join(root, "ui-cache"), filepath.Join(root, name),
			filepath.Join(root, "shared"), exe, mark, cluster.ListenAddrs()[0], strings.Join(origins, ", ")))
		w := &uiWorker{base: fmt.Sprintf("http://127.0.0.1:%d", ports[i]), token: browserToken}
		w.proc = start(t, "run", "-config", cfg)
		ws = append(ws, w)
	}
	for i, w := range ws {
		w.proc.WaitHTTP(t, w.base+"/healthz")
		wait.For(t, wait.Long, names[i]+" joined the group (readyz)", func() (bool, string) {
			c, body := w.get(t, "/readyz")
			return c == 200, fmt.Sprintf("readyz %d %s; output:\n%s", c, body, workertest.Tail(w.proc.Output.String(), 15))
		})
	}
	wait.For(t, wait.Long, "each worker owns one of the 2 partitions", func() (bool, string) {
		l := workersOf(t, &fleetWorker{uiWorker: ws[0]})
		n := 0
		for _, w := range l.Workers {
			if w.State != "running" || w.Load == nil || w.Load.Partitions == nil || *w.Load.Partitions != 1 {
				return false, fmt.Sprintf("%+v", l)
			}
			n++
		}
		return n == 2, fmt.Sprintf("%+v", l)
	})

	cl, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.DefaultProduceTopic("jobs"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for p := range int32(2) {
		if err := cl.ProduceSync(ctx, &kgo.Record{Partition: p, Key: []byte(fmt.Sprintf("order-%d", p)), Value: []byte(`{"n":1}`)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	// The API first: each worker runs one task, held.
	for i, w := range ws {
		wait.For(t, wait.Long, names[i]+" runs one task", func() (bool, string) {
			c, body := w.get(t, "/api/v1/running")
			var r struct {
				Worker string `json:"worker"`
				Total  int    `json:"total"`
			}
			_ = json.Unmarshal([]byte(body), &r)
			return c == 200 && r.Total == 1 && r.Worker == names[i], fmt.Sprintf("%d %s", c, body)
		})
	}

	p := openWithToken(t, b, ws[0].base+"/workers")
	p.waitFor(`document.querySelectorAll("section[data-running-worker] tr[data-task]").length === 2`, "both workers' running tasks under Running now")
	var rows []struct {
		Worker, Task, Href, Source, Where, Key, Attempt, Elapsed string
	}
	jsonOf(t, p, `[...document.querySelectorAll("section[data-running-worker] tr[data-task]")].map((r) => {
		const c = [...r.children].map((td) => td.innerText.trim());
		return { worker: r.closest("section").dataset.runningWorker, task: r.dataset.task, href: r.querySelector("a").getAttribute("href"),
			source: c[1], where: c[2], key: c[3], attempt: c[4], elapsed: c[5] };
	})`, &rows)
	keys := map[string]bool{}
	for i, r := range rows {
		keys[r.Key] = true
		want := names[i]
		checks := []struct {
			what string
			ok   bool
		}{
			{"worker " + want, r.Worker == want},
			{"source kafka", r.Source == "kafka"},
			{"where source p:0", strings.HasPrefix(r.Where, "source ") && strings.HasSuffix(r.Where, ":0")},
			{"attempt 1", r.Attempt == "1"},
			{"elapsed", r.Elapsed != "" && r.Elapsed != "–"},
			{"link to Live", strings.HasSuffix(r.Href, "/live?task="+r.Task) && (i == 0) == strings.HasPrefix(r.Href, "/live")},
		}
		for _, c := range checks {
			if !c.ok {
				t.Errorf("Running now row %d: %s: %+v", i, c.what, r)
			}
		}
	}
	if len(rows) != 2 || !keys["order-0"] || !keys["order-1"] {
		t.Errorf("Running now rows = %+v, want the tasks of order-0 and order-1", rows)
	}
	var asked []string
	jsonOf(t, p, `performance.getEntriesByType("resource").map((e) => e.name)`, &asked)
	for _, u := range asked {
		if strings.HasPrefix(u, ws[1].base) {
			t.Errorf("the browser asked the peer itself (%s): the worker asks its peers, the page only its own worker", u)
		}
	}
	p.screenshot(shots(t), "workers-running-now")

	if err := os.WriteFile(mark, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	p.waitFor(`document.querySelectorAll("section[data-running-worker] tr[data-task]").length === 0 &&
		[...document.querySelectorAll("section[data-running-worker] .running-total")].filter((e) => e.innerText === "Nothing running.").length === 2`,
		"both lists empty once the executor is released")
	if err := ws[1].proc.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	p.waitFor(`(() => { const s = document.querySelector("section[data-running-worker=beta][data-skipped]"); return s && s.innerText.includes("Not listed: stopped"); })()`,
		"beta named as not listed once it stopped")
	checkPage(t, p, false)
}
