package browsertest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"svc/worker/workertest"
	"svc/worker/workertest/wait"
)

// dlqExecutor fails every job (exit 1, 2 or 3 from the message's "code",
// which the DLQ reason then names) unless its id is listed in the file
// FIXED: the operator's "fix" the redrive test applies before redriving.
const dlqExecutor = `#!/bin/sh
in=$(cat)
id=$(printf '%s' "$in" | sed -n 's/.*"id":"\([^"]*\)".*/\1/p')
if grep -qx "$id" FIXED 2>/dev/null; then printf '{"ok":"%s"}\n' "$id"; exit 0; fi
echo "job $id rejected" >&2
case "$in" in *'"code":2'*) exit 2;; *'"code":3'*) exit 3;; esac
exit 1
`

// startDLQFleet runs two Kafka workers of one consumer group on a
// 4-partition topic, sharing one folder, with redrive on and a UI token.
// It returns the cluster's addresses, the workers and the FIXED file.
func startDLQFleet(t *testing.T) ([]string, []*fleetWorker, string) {
	t.Helper()
	cluster := workertest.Cluster(t, 4, []string{"jobs", "jobs-out", "jobs_dlq"})
	root := t.TempDir()
	fixed := filepath.Join(root, "fixed.txt")
	exe := filepath.Join(root, "executor.sh")
	if err := os.WriteFile(exe, []byte(strings.ReplaceAll(dlqExecutor, "FIXED", fixed)), 0o700); err != nil {
		t.Fatal(err)
	}
	var out []*fleetWorker
	names := []string{"alpha", "beta"}
	ports := make([]int, len(names))
	var bases []string
	for i := range names {
		ports[i] = workertest.FreePort(t)
		bases = append(bases, fmt.Sprintf("%q", fmt.Sprintf("http://127.0.0.1:%d", ports[i])))
	}
	for i, name := range names {
		port := ports[i]
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
redrive_enabled = true
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
[handler]
max_attempts = 1
[sources.kafka]
enabled = true
brokers = [%q]
topic = "jobs"
group = "svc-dlq"
startup_align_enabled = false
commit_interval = "500ms"
[[sinks.kafka]]
name = "results"
topic = "jobs-out"
[fleet]
trusted_urls = [ORIGINS]
`, name, port, browserToken, filepath.Join(root, "ui-cache"), filepath.Join(root, name), filepath.Join(root, "shared"), exe, cluster.ListenAddrs()[0]),
			"ORIGINS", strings.Join(bases, ", ")))
		w := &fleetWorker{uiWorker: &uiWorker{base: fmt.Sprintf("http://127.0.0.1:%d", port), token: browserToken}, name: name}
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
	return cluster.ListenAddrs(), out, fixed
}

// readTopic reads a whole topic with a plain consumer (not the worker's
// read API), oldest first per partition.
func readTopic(t *testing.T, brokers []string, topic string) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var out []*kgo.Record
	for idle := 0; idle < 5; {
		ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		f := cl.PollFetches(ctx)
		cancel()
		n := 0
		f.EachRecord(func(r *kgo.Record) { out = append(out, r); n++ })
		if n == 0 {
			idle++
		}
	}
	return out
}

// job is the job id of the DLQ test's message of key kN.
func job(key string) string { return "job-" + strings.TrimPrefix(key, "k") }

func headerOf(r *kgo.Record, key string) string {
	v := ""
	for _, h := range r.Headers {
		if h.Key == key {
			v = string(h.Value)
		}
	}
	return v
}

// TestDLQTriageAndRedrive: on a fleet of real workers sharing a folder,
// 150 failed jobs reach the DLQ and the DLQ tab triages them as an
// operator would: the newest record first (the one a plain consumer
// finds newest), a filter by key, the reasons grouped with their counts,
// paging older and back, a record's task traced in History whose DLQ
// event leads back to the record; then three selected records are dry-run
// (two fixed: would succeed, one would fail, with its reason), the real
// redrive is confirmed, and the records are consumed again: the fixed two
// reach the sink, the third fails again into the DLQ marked as redriven.
// No console error; the DLQ code is not part of the first load.
func TestDLQTriageAndRedrive(t *testing.T) {
	bin := chromiumOrSkip(t)
	dir := shots(t)
	b := startBrowser(t, bin)
	brokers, ws, fixed := startDLQFleet(t)
	alpha := ws[0]
	open := func(path string) *page { return openWithToken(t, b, alpha.base+path) }

	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic("jobs"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	const n = 150
	for i := range n {
		rec := &kgo.Record{Partition: int32(i % 4), Key: []byte(fmt.Sprint("k", i)), Value: []byte(fmt.Sprintf(`{"id":"job-%d","code":%d}`, i, i%3+1))}
		if err := cl.ProduceSync(t.Context(), rec).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	wait.For(t, wait.Long, "150 records in the DLQ", func() (bool, string) {
		n := len(readTopic(t, brokers, "jobs_dlq"))
		return n == 150, fmt.Sprint(n, " records")
	})
	dlq := readTopic(t, brokers, "jobs_dlq")
	newest := slices.MaxFunc(dlq, func(a, b *kgo.Record) int {
		if c := a.Timestamp.Compare(b.Timestamp); c != 0 {
			return c
		}
		if a.Partition != b.Partition {
			return int(a.Partition - b.Partition)
		}
		return int(a.Offset - b.Offset)
	})

	// The first load carries no DLQ code: the UI's own files (the page and
	// its assets, not the API's answers) stay under 100 KiB.
	dash := open("/")
	dash.waitFor(`document.querySelectorAll(".tile").length >= 4`, "the dashboard")
	var first struct {
		UI, All float64
		DLQ     bool
	}
	jsonOf(t, dash, `(() => { const all = performance.getEntriesByType("navigation").concat(performance.getEntriesByType("resource"));
		const size = (es) => es.reduce((a, e) => a + (e.decodedBodySize || 0), 0);
		return { ui: size(all.filter((e) => !new URL(e.name).pathname.startsWith("/api/"))), all: size(all), dlq: all.some((e) => /\/dlq\.js$/.test(e.name)) }; })()`, &first)
	if first.UI == 0 || first.UI > 100*1024 || first.DLQ {
		t.Errorf("first load = %.0f bytes of UI files, dlq.js loaded %v; want under 100 KiB without the DLQ tab's code", first.UI, first.DLQ)
	}
	t.Logf("first load of the dashboard: %.1f KiB of UI files, %.1f KiB with the API's answers", first.UI/1024, first.All/1024)
	checkPage(t, dash, false)

	p := open("/debug?tab=dlq")
	p.waitFor(`document.querySelectorAll("table.records.dlq tbody tr[data-offset]").length === 50`, "the newest page of 50 DLQ records")
	top := fmt.Sprintf("%d:%d", newest.Partition, newest.Offset)
	if got := p.str(`document.querySelector("table.records.dlq tbody tr").dataset.offset`); got != top {
		t.Errorf("first row is DLQ record %s, want the newest, %s (key %s)", got, top, newest.Key)
	}
	if s := p.str(`document.querySelector(".dlq-counts").innerText`); !strings.Contains(s, "holds 150 records in 4 partition(s)") || !strings.Contains(s, "150 of the 150 records read") {
		t.Errorf("counts line = %q", s)
	}
	var reasons [][2]string
	jsonOf(t, p, `[...document.querySelectorAll("table.reasons tbody tr")].map((r) => [r.children[0].innerText, r.children[1].innerText])`, &reasons)
	want := [][2]string{{"executor exited with code 1", "50"}, {"executor exited with code 2", "50"}, {"executor exited with code 3", "50"}}
	if fmt.Sprint(reasons) != fmt.Sprint(want) {
		t.Errorf("reasons = %v, want %v", reasons, want)
	}
	if !strings.Contains(p.text(), "Reasons among the 150 records this page read") {
		t.Errorf("the reasons do not say what they count:\n%s", p.text())
	}
	p.screenshot(dir, "dlq")

	// Paging: older, then newer back to the same first row.
	p.click("#dlq-older", "Older")
	p.waitFor(fmt.Sprintf(`document.querySelector("table.records.dlq tbody tr").dataset.offset !== %q`, top), "the older page")
	p.click("#dlq-newer", "Newer")
	p.waitFor(fmt.Sprintf(`document.querySelector("table.records.dlq tbody tr").dataset.offset === %q && document.querySelector("#dlq-newer").disabled`, top), "the newest page again, nothing newer")

	// Filter by key.
	p.fill("#dlq-key", "k42")
	p.click("#dlq-search", "Search")
	p.waitFor(`document.querySelectorAll("table.records.dlq tbody tr[data-offset]").length === 1 && document.querySelector("table.records.dlq tbody tr").dataset.key === "k42"`, "the one record of key k42")
	if s := p.str(`document.querySelector("table.records.dlq tbody tr").innerText`); !strings.Contains(s, "executor exited with code 1") || !strings.Contains(s, "job-42") {
		t.Errorf("record of k42 = %q, want its reason (code 1) and payload", s)
	}
	// Group by reason: a reason's filter shows its 50.
	p.fill("#dlq-key", "")
	p.click("#dlq-search", "Search")
	p.waitFor(`document.querySelectorAll("table.reasons tbody tr").length === 3`, "the three reasons again")
	p.click(`tr[data-reason="executor exited with code 2"] button.reason-filter`, "filter")
	p.waitFor(`document.querySelectorAll("table.records.dlq tbody tr[data-offset]").length === 50 && document.querySelectorAll("table.reasons tbody tr").length === 1`, "the 50 records of code 2")
	if s := p.str(`[...document.querySelectorAll("table.records.dlq tbody tr")].map((r) => r.children[4].innerText).join("|")`); strings.Count(s, "executor exited with code 2") != 50 {
		t.Errorf("reason filter shows other reasons: %s", s)
	}
	p.fill("#dlq-reason", "")
	p.click("#dlq-search", "Search")
	p.waitFor(fmt.Sprintf(`document.querySelectorAll("table.records.dlq tbody tr[data-offset]").length === 50 && document.querySelector("table.records.dlq tbody tr").dataset.offset === %q`, top), "the newest page again")
	checkPage(t, p, false)

	// From a record to its task's panel (its labels, input, attempts and
	// stderr, in place), on to its trace, and from the trace's dlq_sent
	// event back to the record. One page of 200 holds all 150: the newest
	// 50 may all be beta's.
	tr := open("/debug?tab=dlq")
	tr.fill("#dlq-limit", "200")
	tr.click("#dlq-search", "Search")
	tr.waitFor(`document.querySelectorAll("table.records.dlq tbody tr[data-offset]").length === 150`, "all 150 records on one page")
	tr.waitFor(`document.querySelector("table.records.dlq tr[data-worker=alpha] a.task-link")`, "a task of alpha with its link")
	at := tr.str(`document.querySelector("table.records.dlq tr[data-worker=alpha]").dataset.offset`)
	task := tr.str(`document.querySelector("table.records.dlq tr[data-worker=alpha] a.task-link").innerText`)
	key := tr.str(`document.querySelector("table.records.dlq tr[data-worker=alpha]").dataset.key`)
	tr.click("table.records.dlq tr[data-worker=alpha] a.task-link", task)
	tr.waitFor(`location.search.includes("tab=dlq") && document.querySelector("#detail-panel ol.attempts") && document.querySelector("#detail-panel").innerText.includes("Stdin (the message)")`, "the task's panel on the DLQ tab, with its attempts and its message")
	if s := tr.str(`document.querySelector("#detail-panel").innerText`); !strings.Contains(s, "Task "+task) || !strings.Contains(s, "failed") ||
		!strings.Contains(s, "job "+job(key)+" rejected") || !strings.Contains(s, `"id":"`+job(key)+`"`) || !strings.Contains(s, "alpha") {
		t.Errorf("panel of %s (key %s) = %q, want its outcome, worker, stderr and input", task, key, s)
	}
	tr.click("#detail-panel a.trace-link", "full trace")
	tr.waitFor(`location.pathname === "/history" && document.querySelector("table.trace tr[data-type=dlq_sent] a.dlq-link")`, "the trace with a link to its DLQ record")
	if s := tr.str(`document.querySelector("a.dlq-link").innerText`); s != "DLQ record "+at {
		t.Errorf("trace of %s links %q, want DLQ record %s", task, s, at)
	}
	tr.click("a.dlq-link", "DLQ record")
	tr.waitFor(fmt.Sprintf(`location.search.includes("tab=dlq") && document.querySelector("table.records.dlq tbody tr").dataset.offset === %q && document.querySelector("tr.focus[data-offset='%s']")`, at, at), "the DLQ tab opened at that record")
	checkPage(t, tr, false)

	// Redrive: fix two of the three newest records, select the three, dry
	// run, confirm. The first tab is shown again (a background tab may not
	// paint for its screenshot).
	p.must("Page.bringToFront", nil, nil)
	var rows []struct{ At, Key string }
	jsonOf(t, p, `[...document.querySelectorAll("table.records.dlq tbody tr")].slice(0, 3).map((r) => ({ at: r.dataset.offset, key: r.dataset.key }))`, &rows)
	if len(rows) != 3 {
		t.Fatalf("rows = %v", rows)
	}
	if err := os.WriteFile(fixed, []byte(job(rows[0].Key)+"\n"+job(rows[1].Key)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		p.click(fmt.Sprintf(`tr[data-offset=%q] input.dlq-select`, r.At), "")
	}
	p.waitFor(`document.querySelector(".dlq-selected").innerText === "3 record(s) selected" && !document.querySelector("#redrive-dry").disabled`, "three records selected")
	p.click("#redrive-dry", "Dry run")
	p.waitFor(`document.querySelector(".redrive-summary [data-dry]") && document.querySelector("#redrive-confirm")`, "the dry run's outcome and the confirm button")
	outcome := func(at string) string {
		return p.str(fmt.Sprintf(`(document.querySelector("table.redrive-result tr[data-offset='%s']") || {dataset: {}}).dataset.outcome || ""`, at))
	}
	for i, r := range rows {
		wantOutcome := map[bool]string{true: "would_succeed", false: "would_fail"}[i < 2]
		if got := outcome(r.At); got != wantOutcome {
			t.Errorf("dry run of %s (%s) = %q, want %s", r.At, r.Key, got, wantOutcome)
		}
	}
	if s := p.str(fmt.Sprintf(`document.querySelector("table.redrive-result tr[data-offset='%s']").innerText`, rows[2].At)); !strings.Contains(s, "executor exited with code") {
		t.Errorf("the would-fail line does not say why: %q", s)
	}
	if s := p.str(`document.querySelector(".redrive-summary").innerText`); !strings.Contains(s, "2 would succeed, 1 would fail") || !strings.Contains(s, "Nothing was written") {
		t.Errorf("dry-run summary = %q", s)
	}
	if got := len(readTopic(t, brokers, "jobs")); got != n {
		t.Fatalf("the source topic holds %d records after the dry run, want %d: a dry run writes nothing", got, n)
	}
	// The outcome is right under the button that asked for it.
	var gap float64
	jsonOf(t, p, `document.querySelector(".redrive-summary").getBoundingClientRect().top - document.querySelector("#redrive-dry").getBoundingClientRect().bottom`, &gap)
	if gap < 0 || gap > 100 {
		t.Errorf("the dry run's outcome is %.0f px below its button, want it next to it (under 100 px)", gap)
	}
	if s := p.str(`document.querySelector(".redrive-summary").innerText`); !strings.Contains(s, "1 of them would fail again now") {
		t.Errorf("confirm = %q, want it to say one record would fail again", s)
	}
	if err := p.eval(`document.querySelector(".toolbar.selection").scrollIntoView()`, nil); err != nil {
		t.Fatal(err)
	}
	p.screenshot(dir, "dlq-redrive")
	p.click("#redrive-confirm", "for real")
	p.waitFor(`document.querySelector(".redrive-summary [data-done]")`, "the real redrive's summary")
	if s := p.str(`document.querySelector(".redrive-summary").innerText`); !strings.Contains(s, "Redriven 3 of 3 record(s)") {
		t.Errorf("redrive summary = %q", s)
	}
	// Each line links where its record landed and, once consumed (by
	// either worker), the task that ran it: two ok, one back in the DLQ.
	p.waitFor(`document.querySelectorAll("table.redrive-result a.landed").length === 3 && document.querySelectorAll("table.redrive-result td.consumed[data-after=ok]").length === 2 &&
		document.querySelectorAll("table.redrive-result td.consumed[data-after='DLQ again'] a.dlq-again").length === 1`, "the redriven records consumed: two ok, one DLQ again")
	if s := p.str(fmt.Sprintf(`document.querySelector("table.redrive-result tr[data-offset='%s'] td.consumed").innerText`, rows[2].At)); !strings.Contains(s, "executor exited with code") || strings.Contains(s, "null") {
		t.Errorf("the line of the record that failed again = %q, want its error", s)
	}
	if s := p.str(`document.querySelector(".redrive-follow").innerText`); !strings.Contains(s, "All 3 consumed: 2 ok, 1 failed again.") {
		t.Errorf("follow-up = %q", s)
	}

	// Consumed again: the fixed two reach the sink, the third fails again
	// and is back in the DLQ, marked as redriven once.
	wait.For(t, wait.Long, "the two fixed jobs in the sink and the third back in the DLQ", func() (bool, string) {
		var outs []string
		for _, r := range readTopic(t, brokers, "jobs-out") {
			outs = append(outs, string(r.Value))
		}
		again := 0
		for _, r := range readTopic(t, brokers, "jobs_dlq") {
			if string(r.Key) == rows[2].Key && headerOf(r, "svc-redrive-count") == "1" {
				again++
			}
		}
		s := strings.Join(outs, " ")
		return strings.Contains(s, job(rows[0].Key)) && strings.Contains(s, job(rows[1].Key)) && again == 1, fmt.Sprintf("sink %v, %d redriven DLQ records", outs, again)
	})
	p.click("#dlq-newest", "Newest")
	p.waitFor(fmt.Sprintf(`document.querySelector("table.records.dlq tbody tr").dataset.key === %q && document.querySelector("table.records.dlq tbody tr").innerText.includes("redriven 1×")`, rows[2].Key),
		"the record that failed again, newest, marked as redriven")
	if s := p.str(`document.querySelector(".dlq-counts").innerText`); !strings.Contains(s, "holds 151 records") {
		t.Errorf("counts after the redrive = %q, want 151 records", s)
	}
	checkPage(t, p, false)

	if *updateShots {
		for _, name := range []string{"dlq", "dlq-redrive"} {
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
