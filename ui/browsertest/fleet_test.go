package browsertest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"svc/worker/workertest"
	"svc/worker/workertest/wait"
)

// fleetExecutor answers at once, or after 4 s for a message that says
// "slow" (to build up waiting work).
const fleetExecutor = `#!/bin/sh
in=$(cat)
case "$in" in *slow*) sleep 4;; esac
echo '{"done":true}'
`

// fleetWorker is one svc process of the fleet test.
type fleetWorker struct {
	*uiWorker
	name string
}

// startFleet runs three Kafka workers of one consumer group on a 4-partition
// topic, sharing one folder (cards, history), each trusting the others'
// UIs, with a 300 ms registry heartbeat (a killed worker turns unreachable
// within a second), a cost label, tiny intake caps (W = 1: backpressure
// at 4 waiting messages) and a 2 s group session (a killed member's
// partitions move on soon).
func startFleet(t *testing.T) (*kgo.Client, []*fleetWorker) {
	t.Helper()
	cluster := workertest.Cluster(t, 4, []string{"jobs", "jobs-out", "jobs_dlq"})
	root := t.TempDir()
	exe := filepath.Join(root, "executor.sh")
	if err := os.WriteFile(exe, []byte(fleetExecutor), 0o700); err != nil {
		t.Fatal(err)
	}
	names := []string{"alpha", "beta", "gamma"}
	ports := make([]int, len(names))
	var bases []string
	for i := range names {
		ports[i] = workertest.FreePort(t)
		bases = append(bases, fmt.Sprintf("%q", fmt.Sprintf("http://127.0.0.1:%d", ports[i])))
	}
	var out []*fleetWorker
	for i, name := range names {
		cfg := workertest.WriteConfig(t, strings.ReplaceAll(fmt.Sprintf(`
[worker]
name = %q
cluster = "shop"
shutdown_timeout = "5s"
[metrics]
enabled = false
[ui]
port = %d
auth_token = %q
prometheus_url = "https://prom.example.com"
prometheus_worker_label = "instance"
allowed_ws_origins = [ORIGINS]
[ui.consume_pause]
enabled = true
[ui.release]
cache_dir = %q
[storage]
dir = %q
[shared]
dir = %q
[executor]
binary_path = %q
pool_size = 2
timeout = "30s"
[pipeline]
max_in_flight = 1
[handler]
max_attempts = 1
[sources.kafka]
enabled = true
brokers = [%q]
topic = "jobs"
group = "svc-fleet"
startup_align_enabled = false
commit_interval = "500ms"
max_poll_records = 1
client_config = { "session.timeout.ms" = "2000", "heartbeat.interval.ms" = "500" }
[[sinks.kafka]]
name = "results"
topic = "jobs-out"
[throughput]
cost_label = "rows"
[fleet]
trusted_urls = [ORIGINS]
[fleet.registry]
heartbeat = "300ms"
`, name, ports[i], browserToken, filepath.Join(root, "ui-cache"), filepath.Join(root, name), filepath.Join(root, "shared"), exe,
			cluster.ListenAddrs()[0]), "ORIGINS", strings.Join(bases, ", ")))
		w := &fleetWorker{uiWorker: &uiWorker{base: fmt.Sprintf("http://127.0.0.1:%d", ports[i]), token: browserToken}, name: name}
		w.proc = start(t, "run", "-config", cfg)
		out = append(out, w)
	}
	for _, w := range out {
		w.proc.WaitHTTP(t, w.base+"/healthz")
		wait.For(t, wait.Long, w.name+" joined the group (readyz)", func() (bool, string) {
			c, body := w.get(t, "/readyz")
			return c == 200, fmt.Sprintf("readyz %d %s; output:\n%s", c, body, workertest.Tail(w.proc.Output.String(), 15))
		})
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.DefaultProduceTopic("jobs"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl, out
}

// listed is the part of GET /api/v1/fleet/workers the test reads.
type listed struct {
	Workers []struct {
		Name  string `json:"name"`
		State string `json:"state"`
		Load  *struct {
			Partitions *int   `json:"partitions"`
			Intake     string `json:"intake"`
			Lag        *int   `json:"lag"`
		} `json:"load"`
	} `json:"workers"`
}

func workersOf(t *testing.T, w *fleetWorker) listed {
	t.Helper()
	var l listed
	code, body := w.get(t, "/api/v1/fleet/workers")
	if code != 200 || json.Unmarshal([]byte(body), &l) != nil {
		t.Fatalf("workers list = %d %s", code, body)
	}
	return l
}

// produce sends n messages round the 4 partitions.
func produce(t *testing.T, cl *kgo.Client, n int, body string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for i := range n {
		rec := &kgo.Record{Partition: int32(i % 4), Key: []byte(fmt.Sprintf("k%d", i)), Value: []byte(fmt.Sprintf(`{"n":%d,"say":%q}`, i, body)),
			Headers: []kgo.RecordHeader{{Key: "svc-label-rows", Value: []byte(fmt.Sprint(10 + i))}}}
		if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestFleetPages runs a fleet of three real workers sharing a folder and
// checks, in Chromium, what an operator sees of it: the Workers page
// lists each worker with its state, heartbeat, version, partitions,
// work in flight, throughput, lag, intake and breakers, and a link to
// its UI; a worker stopped cleanly shows stopped and a SIGKILLed one
// unreachable, there and on Live, which opens no socket to either (no
// console error); the Runtime tab draws its charts, lists stalls, shows
// throughput with units and the raw JSON behind a toggle; the Dashboard
// and the Pause tab state the backpressure rule with the worker's own
// caps, and the Prometheus link shows backpressure and pause apart.
func TestFleetPages(t *testing.T) {
	bin := chromiumOrSkip(t)
	dir := shots(t)
	b := startBrowser(t, bin)
	cl, ws := startFleet(t)
	alpha, beta, gamma := ws[0], ws[1], ws[2]
	open := func(path string) *page { return openWithToken(t, b, alpha.base+path) }

	wait.For(t, wait.Long, "alpha lists the three workers running, their cards carrying all 4 partitions", func() (bool, string) {
		l, parts := workersOf(t, alpha), 0
		for _, w := range l.Workers {
			if w.State != "running" || w.Load == nil || w.Load.Partitions == nil {
				return false, fmt.Sprintf("%+v", l)
			}
			parts += *w.Load.Partitions
		}
		return len(l.Workers) == 3 && parts == 4, fmt.Sprintf("%d workers, %d partitions", len(l.Workers), parts)
	})
	live := open("/live")
	live.waitFor(`document.body.innerText.includes("3/3 live")`, "Live streaming from the three workers")
	produce(t, cl, 12, "quick")
	live.waitFor(`document.querySelectorAll("table.live tbody tr").length >= 12`, "the 12 tasks of the fleet on Live")

	wp := open("/workers")
	wp.waitFor(`document.querySelectorAll("table.workers tbody tr[data-state=running]").length === 3`, "three running workers on the Workers page")
	wp.waitFor(`[...document.querySelectorAll("table.workers tbody tr")].every((r) => / msgs?$/.test(r.children[7].innerText.trim()))`, "every worker's lag")
	var rows []struct {
		Name, State, Heartbeat, Version, Partitions, InFlight, Throughput, Lag, Intake, Breakers, UI, Href string
	}
	readRows := func() {
		jsonOf(t, wp, `[...document.querySelectorAll("table.workers tbody tr")].map((r) => {
			const c = [...r.children].map((td) => td.innerText.trim());
			const a = r.children[10].querySelector("a");
			return { name: r.dataset.worker, state: c[1], heartbeat: c[2], version: c[3], partitions: c[4], inFlight: c[5],
				throughput: c[6], lag: c[7], intake: c[8], breakers: c[9], ui: c[10], href: a ? a.getAttribute("href") : "" };
		})`, &rows)
	}
	readRows()
	parts := 0
	for _, r := range rows {
		var n int
		fmt.Sscan(r.Partitions, &n)
		parts += n
		checks := []struct {
			what string
			ok   bool
		}{
			{"state running", r.State == "running"},
			{"heartbeat age", strings.Contains(r.Heartbeat, "s ago")},
			{"version", r.Version != "" && r.Version != "–"},
			{"in flight with units", strings.Contains(r.InFlight, " msg") && strings.Contains(r.InFlight, "/2 executors")},
			{"throughput with units", strings.HasSuffix(r.Throughput, "tasks/s")},
			{"lag with units", regexp.MustCompile(` msgs?$`).MatchString(r.Lag)},
			{"intake flowing", r.Intake == "flowing"},
			{"breaker of sink results closed", strings.Contains(r.Breakers, "results") && strings.Contains(r.Breakers, "closed")},
			{"link to its UI", r.Name == "alpha" && r.Href == "/" || r.Name != "alpha" && strings.HasPrefix(r.Href, "http://127.0.0.1:")},
		}
		for _, c := range checks {
			if !c.ok {
				t.Errorf("Workers row %s: %s: %+v", r.Name, c.what, r)
			}
		}
	}
	if parts != 4 || len(rows) != 3 {
		t.Errorf("Workers page: %d rows owning %d partitions, want 3 rows owning the topic's 4: %+v", len(rows), parts, rows)
	}

	// beta stops cleanly, gamma is killed: both while Live is open.
	if err := beta.proc.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := beta.proc.Wait(t); code != 0 {
		t.Errorf("beta exit code after SIGTERM = %d, want 0", code)
	}
	if err := gamma.proc.Cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killedAt := time.Now()
	wp.waitFor(`document.querySelector("tr[data-worker=beta][data-state=stopped]") && document.querySelector("tr[data-worker=gamma][data-state=unreachable]")`,
		"beta stopped and gamma unreachable on the Workers page")
	t.Logf("gamma shown unreachable %.1f s after SIGKILL", time.Since(killedAt).Seconds())
	readRows()
	for _, r := range rows {
		if r.Name == "alpha" {
			continue
		}
		want := map[string]string{"beta": "stopped", "gamma": "unreachable"}[r.Name]
		if r.State != want || r.Partitions != "–" || r.Lag != "–" || r.Intake != "–" {
			t.Errorf("Workers row %s = %+v, want state %s and no load (–)", r.Name, r, want)
		}
	}
	live.waitFor(`document.querySelector("li[data-worker=beta][data-conn=stopped]") && document.querySelector("li[data-worker=gamma][data-conn=unreachable]") && document.body.innerText.includes("1/3 live")`,
		"Live showing beta stopped and gamma unreachable")
	time.Sleep(2 * time.Second) // time enough for a reconnect a dead worker should not get
	live.screenshot(dir, "live-fleet")
	checkPage(t, live, false)
	fresh := open("/live")
	fresh.waitFor(`document.querySelector("li[data-worker=beta][data-conn=stopped]") && document.querySelector("li[data-worker=gamma][data-conn=unreachable]") && document.body.innerText.includes("1/3 live")`,
		"a Live page opened afterwards showing both as such")
	time.Sleep(time.Second)
	checkPage(t, fresh, false)

	// Backpressure on alpha, now the owner of all 4 partitions: W = 1,
	// so 6 slow messages waiting hold the topic (a partition's own cap is
	// 2, and a poll takes 1: up to 3 wait in each).
	wait.For(t, wait.Long, "alpha owning all 4 partitions", func() (bool, string) {
		l := workersOf(t, alpha)
		for _, w := range l.Workers {
			if w.Name == "alpha" && w.Load != nil && w.Load.Partitions != nil {
				return *w.Load.Partitions == 4, fmt.Sprint(*w.Load.Partitions)
			}
		}
		return false, fmt.Sprintf("%+v", l)
	})
	dash := open("/")
	dash.waitFor(`document.querySelector(".bp-words") && document.querySelector(".bp-words").innerText.includes("off:")`, "the Intake tile")
	if s := dash.str(`document.querySelector(".bp-words").innerText`); !strings.Contains(s, "messages waiting to run; this worker stops fetching when") || strings.Contains(s, "max(") || strings.Contains(s, "× W") {
		t.Errorf("Intake tile backpressure words = %q, want what waits and what happens past the limit, in the operator's words", s)
	}
	href := dash.str(`[...document.querySelectorAll("a")].find((a) => a.textContent === "Backpressure and pause").href`)
	u, err := url.Parse(href)
	if err != nil {
		t.Fatal(err)
	}
	wantExpr := `label_replace(max(svc_backpressure_active{instance="alpha"}), "holder", "backpressure", "", "") or label_replace(max(svc_consume_pause_active{instance="alpha"}), "holder", "consume_pause", "", "")`
	if got := u.Query().Get("g0.expr"); got != wantExpr {
		t.Errorf("Backpressure and pause link query = %s, want %s", got, wantExpr)
	}
	produce(t, cl, 12, "slow")
	dash.waitFor(`document.querySelector(".bp-words").innerText.includes("more than this worker queues (6 messages or 64 MiB), so it stopped fetching")`, "the Intake tile explaining active backpressure with alpha's caps")
	if s := dash.str(`document.querySelector(".bp-words").innerText`); !strings.Contains(s, "active:") || !strings.Contains(s, "once fewer than 3 wait and under 32 MiB") || !strings.Contains(s, "Nothing is lost") {
		t.Errorf("Intake tile under backpressure = %q", s)
	}
	wp.waitFor(`document.querySelector("tr[data-worker=alpha]").children[8].innerText.includes("backpressure")`, "alpha's intake held by backpressure on the Workers page")
	wp.screenshot(dir, "workers")
	checkPage(t, wp, false)
	checkPage(t, dash, false)

	pause := open("/debug?tab=pause")
	pause.waitFor(`document.querySelector(".per-worker") && document.querySelector(".precedence") && document.querySelector(".precedence").innerText.includes("(6 messages or 64 MiB)")`, "the Pause tab with its per-worker note and alpha's caps")
	if s := pause.str(`document.querySelector(".per-worker").innerText`); !strings.Contains(s, "A pause is per worker") || !strings.Contains(s, "alpha alone") {
		t.Errorf("per-worker note = %q", s)
	}
	checkPage(t, pause, false)

	rt := open("/debug?tab=runtime")
	charts := []string{"lag", "heap", "gc", "goroutines", "rss"}
	rt.waitFor(`[...document.querySelectorAll("svg.chart")].length === 5 && [...document.querySelectorAll("svg.chart polyline")].every((l) => Number(l.dataset.n) >= 2)`,
		"five runtime charts of two samples or more (one every 10 s)")
	var axes []string
	jsonOf(t, rt, `[...document.querySelectorAll(".chart-axis")].map((a) => a.innerText.replace(/\s+/g, " ").trim())`, &axes)
	if len(axes) != 5 || !regexp.MustCompile(`^\d\d:\d\d:\d\d \d\d:\d\d:\d\d$`).MatchString(axes[0]) {
		t.Errorf("runtime time axes = %q, want 5, each the first and last sample's time (hh:mm:ss over the 10-minute window)", axes)
	}
	for _, c := range charts {
		var got struct {
			Lines, Points, Dots int
			Label               string
		}
		jsonOf(t, rt, fmt.Sprintf(`(() => { const s = document.querySelector('svg.chart[data-chart=%q]'); const l = s.querySelector("polyline");
			return { lines: s.querySelectorAll("polyline").length, points: l.getAttribute("points").trim().split(/\s+/).length,
				dots: s.querySelectorAll("circle").length, label: s.getAttribute("aria-label") }; })()`, c), &got)
		if got.Lines == 0 || got.Points < 2 || got.Dots != got.Lines || !strings.Contains(got.Label, "samples") {
			t.Errorf("chart %s = %+v, want a line of 2+ points and a dot per series", c, got)
		}
	}
	if s := rt.str(`document.body.innerText`); !strings.Contains(s, "No stall since the worker started") && rt.str(`String(document.querySelectorAll("li.stall").length)`) == "0" {
		t.Errorf("Runtime tab has neither stalls nor a no-stall note:\n%s", s)
	}
	tp := rt.str(`document.querySelector("table.throughput").innerText`)
	for _, want := range []string{"Throughput (rows/s)", "Cost (rows)", "since start", " rows/s", " rows"} {
		if !strings.Contains(tp, want) {
			t.Errorf("throughput table lacks %q:\n%s", want, tp)
		}
	}
	if rt.str(`String(document.querySelector("#runtime-raw").hidden)`) != "true" {
		t.Error("raw JSON shown before the toggle")
	}
	rt.click("button.raw-toggle", "Show raw JSON")
	rt.waitFor(`!document.querySelector("#runtime-raw").hidden && document.querySelector("#runtime-raw").innerText.includes('"cost_label": "rows"')`, "the raw JSON after the toggle")
	rt.click("button.raw-toggle", "Hide raw JSON")
	rt.waitFor(`document.querySelector("#runtime-raw").hidden`, "the raw JSON hidden again")
	rt.screenshot(dir, "runtime")
	checkPage(t, rt, false)

	if *updateShots {
		for _, name := range []string{"workers", "runtime"} {
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
