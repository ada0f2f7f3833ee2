package browsertest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"svc/worker/workertest"
	"svc/worker/workertest/wait"
)

// TestDemoRedriveLoop walks the whole loop an operator walks in `svc
// demo`: orders in GBP fail into the DLQ; a record's task opens its panel
// (labels, input, attempts, stderr); a dry run of them says all would fail
// again and asks for the fix first; the fix the banner prints (touch a
// file) is applied; the dry run again says they would succeed; the real
// redrive says where each record landed (a link to it in the Kafka tab)
// and, once consumed, the task that ran it, ok, whose panel opens from the
// line. The outcome stays next to the button that asked for it, and no
// console error is logged.
func TestDemoRedriveLoop(t *testing.T) {
	bin := chromiumOrSkip(t)
	dir := shots(t)
	b := startBrowser(t, bin)
	ui, in, mt := workertest.FreePort(t), workertest.FreePort(t), workertest.FreePort(t)
	demo := start(t, "demo", "-ui-port", fmt.Sprint(ui), "-ingress-port", fmt.Sprint(in), "-metrics-port", fmt.Sprint(mt))
	base := fmt.Sprintf("http://127.0.0.1:%d", ui)
	demo.WaitHTTP(t, base+"/healthz")
	// The banner follows the servers' start: /healthz may answer first.
	var m []string
	wait.For(t, wait.Long, "the demo's banner printing the fix", func() (bool, string) {
		m = regexp.MustCompile(`the fix:\s+touch (\S+)`).FindStringSubmatch(demo.Output.String())
		return m != nil, demo.Output.String()
	})
	fix := m[1]

	// Two orders in GBP in the DLQ (one in six samples, one every 2 s).
	gbp := func() int {
		c, body := (&uiWorker{base: base}).get(t, "/api/v1/debug/dlq/records?limit=200")
		var page struct {
			Records []struct{ Payload string } `json:"records"`
		}
		if c != 200 || json.Unmarshal([]byte(body), &page) != nil {
			return 0
		}
		n := 0
		for _, r := range page.Records {
			if strings.Contains(r.Payload, `"currency":"GBP"`) {
				n++
			}
		}
		return n
	}
	wait.For(t, wait.Long, "two orders in GBP in the DLQ", func() (bool, string) {
		n := gbp()
		return n >= 2, fmt.Sprint(n, " GBP orders in the DLQ")
	})

	p := b.newPage(t)
	p.navigate(base + "/debug?tab=dlq")
	p.waitFor(`document.querySelectorAll("table.records.dlq tbody tr[data-offset]").length >= 2`, "the DLQ records")
	// Their reason (spawn mode) is exit code 3: filter by it.
	p.fill("#dlq-reason", "code 3")
	p.click("#dlq-search", "Search")
	p.waitFor(`document.querySelectorAll("table.reasons tbody tr").length === 1 && document.querySelectorAll("table.records.dlq tbody tr[data-offset]").length >= 2`, "the GBP orders alone")
	var rows []string
	jsonOf(t, p, `[...document.querySelectorAll("table.records.dlq tbody tr[data-offset]")].map((r) => r.innerText)`, &rows)
	for _, r := range rows {
		if !strings.Contains(r, "GBP") {
			t.Errorf("the filter by reason shows a record not in GBP: %q", r)
		}
	}
	n := len(rows)

	// A record's task opens its full panel in place.
	p.click("table.records.dlq tbody tr a.task-link", "")
	p.waitFor(`document.querySelector("#detail-panel ol.attempts") && document.querySelector("#detail-panel").innerText.includes("Stdin (the message)")`, "the task panel with its attempts and its message")
	panel := p.str(`document.querySelector("#detail-panel").innerText`)
	for _, want := range []string{"failed", "customer", "wayne", "origin", "no exchange rate for GBP", `"currency":"GBP"`, "stderr tail"} {
		if !strings.Contains(panel, want) {
			t.Errorf("the DLQ record's task panel lacks %q:\n%s", want, panel)
		}
	}
	p.click("#detail-panel button.close", "")
	p.waitFor(`!document.querySelector("#detail-panel")`, "the panel closed")

	// Before the fix: all would fail again, and the page says to fix first.
	p.click("#dlq-select-page", "")
	p.waitFor(fmt.Sprintf(`document.querySelector(".dlq-selected").innerText === "%d record(s) selected"`, n), "the page selected")
	p.click("#redrive-dry", "Dry run")
	p.waitFor(`document.querySelector(".redrive-summary .nothing-succeeds")`, "the warning that nothing would succeed")
	if s := p.str(`document.querySelector(".redrive-summary").innerText`); !strings.Contains(s, fmt.Sprintf("All %d would fail again: fix the handler first.", n)) ||
		!strings.Contains(s, "Dry run again") || !strings.Contains(s, "Redrive anyway") {
		t.Errorf("dry run before the fix = %q, want all %d would fail again, fix first, dry run again", s, n)
	}
	var gap float64
	jsonOf(t, p, `document.querySelector(".redrive-summary").getBoundingClientRect().top - document.querySelector("#redrive-dry").getBoundingClientRect().bottom`, &gap)
	if gap < 0 || gap > 100 {
		t.Errorf("the dry run's outcome is %.0f px below its button, want it next to it (under 100 px)", gap)
	}
	if err := p.eval(`document.querySelector(".toolbar.selection").scrollIntoView()`, nil); err != nil {
		t.Fatal(err)
	}
	p.screenshot(dir, "redrive-fix-first")

	// The fix, as the banner says; the dry run again says would succeed.
	if err := os.WriteFile(fix, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	p.click("#redrive-dry-again", "Dry run again")
	p.waitFor(fmt.Sprintf(`document.querySelector(".redrive-summary [data-dry]") && document.querySelector(".redrive-summary").innerText.includes("%d would succeed, 0 would fail") && document.querySelector("#redrive-confirm.primary")`, n), "the dry run after the fix: all would succeed")
	if c := p.str(`String(document.querySelectorAll("table.redrive-result tr[data-outcome=would_succeed]").length)`); c != fmt.Sprint(n) {
		t.Errorf("%s would_succeed lines after the fix, want %d", c, n)
	}

	// Redrive: each line says where its record landed, then the task that
	// ran it, ok.
	p.click("#redrive-confirm", "for real")
	p.waitFor(`document.querySelector(".redrive-summary [data-done]")`, "the real redrive's summary")
	p.waitFor(fmt.Sprintf(`document.querySelectorAll("table.redrive-result a.landed").length === %d && document.querySelectorAll("table.redrive-result td.consumed[data-after=ok] a.redriven-task").length === %d`, n, n),
		"every redriven record consumed, ok, with its task")
	if s := p.str(`document.querySelector(".redrive-follow").innerText`); !strings.Contains(s, fmt.Sprintf("All %d consumed: %d ok, 0 failed again.", n, n)) {
		t.Errorf("follow-up = %q", s)
	}
	p.screenshot(dir, "redrive-consumed")

	// The line's task opens its panel: ok, labelled with the run.
	task := p.str(`document.querySelector("table.redrive-result a.redriven-task").innerText`)
	p.click("table.redrive-result a.redriven-task", task)
	p.waitFor(`document.querySelector("#detail-panel ol.attempts") && document.querySelector("#detail-panel").innerText.includes("Stdin (the message)")`, "the redriven task's panel with its message")
	panel = p.str(`document.querySelector("#detail-panel").innerText`)
	for _, want := range []string{"Task " + task, "ok", "redrive", "demo@", `"currency":"GBP"`} {
		if !strings.Contains(panel, want) {
			t.Errorf("the redriven task's panel lacks %q:\n%s", want, panel)
		}
	}
	p.click("#detail-panel button.close", "")
	checkPage(t, p, false)

	// Where it landed: the Kafka tab opens at that record, marked as a
	// redrive of the DLQ record.
	landed := p.str(`document.querySelector("table.redrive-result a.landed code").innerText`)
	from := p.str(`document.querySelector("table.redrive-result a.landed").closest("tr").dataset.offset`)
	p.click("table.redrive-result a.landed", landed)
	p.waitFor(fmt.Sprintf(`location.search.includes("tab=kafka") && document.querySelector("table.records tbody tr[data-offset='%s']")`, landed), "the redriven record in the Kafka tab")
	if s := p.str(`document.querySelector("table.records tbody tr").innerText`); !strings.Contains(s, "svc-redrive-source") || !strings.Contains(s, from) || !strings.Contains(s, "GBP") {
		t.Errorf("record %s in the Kafka tab = %q, want the order marked as a redrive of DLQ record %s", landed, s, from)
	}
	checkPage(t, p, false)

	if *updateShots {
		for _, name := range []string{"redrive-fix-first", "redrive-consumed"} {
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
