package browsertest

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBrowser drives the UI of two real workers through the scenarios an
// operator meets. One Chromium serves every subtest, one tab each.
func TestBrowser(t *testing.T) {
	bin := chromiumOrSkip(t)
	dir := shots(t)
	t.Logf("screenshots: %s", dir)
	fmt.Printf("browser test screenshots: %s\n", dir)
	b := startBrowser(t, bin)
	w := startKafkaWorker(t)
	open := func(t *testing.T, path string) *page {
		p := b.newPage(t)
		p.must("Emulation.setTimezoneOverride", map[string]any{"timezoneId": "Europe/Berlin"}, nil)
		sep := "?"
		if strings.Contains(path, "?") {
			sep = "&"
		}
		p.navigate(w.base + path + sep + "token=" + browserToken)
		return p
	}
	shot := func(p *page, name string) { p.screenshot(dir, name) }

	t.Run("sign-in flow with a token", func(t *testing.T) {
		p := b.newPage(t)
		p.navigate(w.base + "/history")
		p.waitFor(`document.querySelector("input[name=token]")`, "the sign-in form")
		shot(p, "signin")
		p.fill("input[name=token]", "wrong")
		p.click("button[type=submit]", "Sign in")
		p.waitFor(`document.body.innerText.includes("not accepted")`, "the refusal")
		p.fill("input[name=token]", browserToken)
		p.click("button[type=submit]", "Sign in")
		p.waitFor(`document.querySelector("#trace-task")`, "the History page after sign-in")
		if s := p.str("location.href"); strings.Contains(s, "token") {
			t.Errorf("address bar keeps the token: %s", s)
		}
		if s := p.str(`sessionStorage.getItem("svc.token") || ""`); s != browserToken {
			t.Errorf("sessionStorage token = %q, want it kept for the tab", s)
		}
		// A reload (no token in the URL) signs in again from sessionStorage.
		p.navigate(w.base + "/debug?tab=config")
		p.waitFor(`document.body.innerText.includes("effective configuration")`, "the Debug page after a reload")
		// A token that stops working mid-session returns to the prompt.
		if err := p.eval(`sessionStorage.setItem("svc.token", "rotated-away")`, nil); err != nil {
			t.Fatal(err)
		}
		p.click("#nav a", "Dashboard")
		p.waitFor(`document.querySelector("input[name=token]")`, "the sign-in form after a 401 mid-session")
		checkPage(t, p, true)
	})

	t.Run("dashboard renders with data, fits a phone, dark mode", func(t *testing.T) {
		p := open(t, "/")
		p.waitFor(`document.querySelectorAll(".tile").length >= 4 && document.querySelector("a.task-link")`, "dashboard tiles and failures")
		p.waitFor(`document.querySelector("[data-outcome=failed]").textContent.match(/[1-9]/)`, "a failed count")
		var size float64
		jsonOf(t, p, `performance.getEntriesByType("navigation").concat(performance.getEntriesByType("resource")).reduce((a, e) => a + (e.decodedBodySize || 0), 0)`, &size)
		if size == 0 || size > 100*1024 {
			t.Errorf("first load = %.0f bytes, want under 100 KiB", size)
		}
		t.Logf("first load of the dashboard: %.1f KiB", size/1024)
		if !strings.Contains(p.text(), "Runbook") || !strings.Contains(p.text(), "Tasks/s by status") {
			t.Errorf("dashboard lacks its links:\n%s", p.text())
		}
		// The History tile: the budget (history.max_bytes by default) and
		// how far back history goes.
		p.waitFor(`[...document.querySelectorAll(".tile")].some((t) => t.querySelector("h2").textContent === "History" &&
			/ of 4\.0 GiB$/.test(t.querySelector(".big").textContent) && t.querySelector("meter") &&
			/history since|no sealed history yet/.test(t.textContent) && t.textContent.includes("kept 7 days at most"))`, "the History tile")
		// The In flight tile: Kafka messages in flight and how many deliver.
		p.waitFor(`[...document.querySelectorAll(".tile")].some((t) => t.querySelector("h2").textContent === "In flight" &&
			/Kafka messages in flight \(\d+ delivering\) · \d+ finished, waiting for their transaction/.test(t.textContent))`, "the In flight tile's deliveries and staged messages")
		// The Intake tile: this worker delivers exactly-once, and its
		// transactions commit.
		p.waitFor(`document.querySelector(".delivery-words[data-delivery=exactly_once]") &&
			/exactly-once · [1-9][\d,]* transactions committed, \d+ aborted/.test(document.querySelector(".delivery-words").textContent)`, "the Intake tile's delivery mode")
		shot(p, "dashboard")
		// Keyboard: the first Tab reaches the skip link, the next ones the nav.
		p.key("Tab")
		if s := p.str("document.activeElement.textContent"); s != "Skip to content" {
			t.Errorf("first Tab focuses %q, want the skip link", s)
		}
		p.key("Tab")
		p.key("Tab")
		if s := p.str("document.activeElement.textContent"); s != "Dashboard" {
			t.Errorf("third Tab focuses %q, want the first nav entry", s)
		}
		p.viewport(390, 844)
		p.waitFor(`document.documentElement.scrollWidth <= 392`, "no horizontal scrolling at 390 px")
		shot(p, "dashboard-phone")
		p.viewport(1280, 800)
		light := p.str(`getComputedStyle(document.body).backgroundColor`)
		p.must("Emulation.setEmulatedMedia", map[string]any{"features": []map[string]string{{"name": "prefers-color-scheme", "value": "dark"}}}, nil)
		p.waitFor(fmt.Sprintf(`getComputedStyle(document.body).backgroundColor !== %q`, light), "the dark scheme")
		shot(p, "dashboard-dark")
		checkPage(t, p, false)
	})

	t.Run("a failed message from the dashboard through live and its trace to a probe from the DLQ", func(t *testing.T) {
		p := open(t, "/")
		p.click("a.task-link", "")
		p.waitFor(`location.pathname === "/live" && document.querySelector("#detail-panel .attempts")`, "the task panel on Live")
		p.waitFor(`document.querySelector("#detail-panel").innerText.includes("payment declined")`, "the stderr tail")
		p.waitFor(`document.querySelector("#detail-panel").innerText.includes("Stdin")`, "the message as stdin")
		panel := p.str(`document.querySelector("#detail-panel").innerText`)
		for _, want := range []string{"failed", "dlq", "origin", "browser-test", "please fail"} {
			if !strings.Contains(panel, want) {
				t.Errorf("task panel lacks %q:\n%s", want, panel)
			}
		}
		shot(p, "live")
		p.click("#detail-panel a.trace-link", "")
		p.waitFor(`document.querySelector("table.trace tr[data-type=dlq_sent]")`, "the trace with its dlq_sent event")
		shot(p, "history")
		p.click("#nav a", "Debug")
		p.click(`button[data-tab="dlq"]`, "DLQ")
		p.waitFor(`document.querySelectorAll("table.records tbody tr").length >= 2`, "the DLQ records")
		if s := p.str(`document.querySelector("table.records").innerText`); !strings.Contains(s, "exit status 1") && !strings.Contains(s, "exit") {
			t.Logf("DLQ reason column: %s", s)
		}
		// dlq.png comes from TestDLQTriageAndRedrive (150 records, filters, reasons).
		p.click("table.records a.probe-link", "Probe")
		p.waitFor(`document.body.innerText.includes("Prefilled from dlq")`, "the probe tab prefilled from the DLQ record")
		if s := p.str(`document.querySelector("#probe-payload").value`); !strings.Contains(s, "please fail") {
			t.Errorf("probe payload = %q, want the dead-lettered message", s)
		}
		p.click("#probe-run", "Run")
		p.waitFor(`document.querySelector(".probe-result[data-status=failed]")`, "the probe failing again")
		if s := p.str(`document.querySelector(".probe-result").innerText`); !strings.Contains(s, "payment declined") {
			t.Errorf("probe result lacks the stderr:\n%s", s)
		}
		checkPage(t, p, false)
	})

	t.Run("probe renders the probe details", func(t *testing.T) {
		p := open(t, "/debug?tab=probe")
		p.fill("#probe-payload", `{"order":99,"customer":"acme"}`)
		p.click("#probe-run", "Run")
		p.waitFor(`document.querySelector(".probe-result[data-status=ok] .details")`, "the rendered probe details")
		var got struct {
			Link, Badge, Size string
			TreeRows          int
		}
		jsonOf(t, p, `{
			link: document.querySelector('[data-field=lines] a').getAttribute("href"),
			badge: document.querySelector('[data-field=state] .badge').className,
			size: document.querySelector('[data-field=raw_size]').innerText,
			treeRows: document.querySelectorAll('[data-field=rules] tbody tr').length }`, &got)
		if got.Link != "https://shop.example.com/products/a%2F1%20x" || !strings.Contains(got.Badge, "badge-green") || !strings.Contains(got.Size, "2.0 KiB") || got.TreeRows != 2 {
			t.Errorf("probe details = %+v", got)
		}
		_ = p.eval(`document.querySelector(".probe-result").scrollIntoView()`, nil)
		shot(p, "probe")
		checkPage(t, p, false)
	})

	t.Run("consume pause started, counting down, resumed", func(t *testing.T) {
		p := open(t, "/debug?tab=pause")
		p.click("button.preset", "Pause 60s")
		p.waitFor(`document.querySelector(".countdown")`, "the countdown")
		first := p.str(`document.querySelector(".countdown").dataset.ms`)
		p.waitFor(fmt.Sprintf(`document.querySelector(".countdown") && document.querySelector(".countdown").dataset.ms !== %q`, first), "the countdown moving")
		if code, body := w.get(t, "/api/v1/debug/consume-pause"); code != 200 || !strings.Contains(body, `"active":true`) {
			t.Errorf("pause state = %d %s, want active", code, body)
		}
		if s := p.str(`document.querySelector(".precedence").innerText`); !strings.Contains(s, "backpressure cannot resume") {
			t.Errorf("precedence words = %q", s)
		}
		shot(p, "pause")
		p.click("#resume", "Resume")
		p.waitFor(`document.body.innerText.includes("Consuming.")`, "the resumed state")
		if _, body := w.get(t, "/api/v1/debug/consume-pause"); !strings.Contains(body, `"active":false`) {
			t.Errorf("pause state after resume = %s", body)
		}
		checkPage(t, p, false)
	})

	t.Run("declared page: every view, format, badge, link and a renderer that throws", func(t *testing.T) {
		p := open(t, "/p/showcase")
		p.waitFor(`document.querySelector('[data-view=table] tbody tr .money') && document.querySelector('.stat') && document.querySelectorAll('.placeholder').length === 2`, "the showcase widgets")
		var got struct {
			OrderHref, Hint, Status, Money, Number, NumberTitle, Duration, Bytes, Stamp, StampTitle string
			CustomerLinks, KindLinks                                                                int
			Text                                                                                    string
		}
		jsonOf(t, p, `(() => {
			const row = document.querySelector('[data-view=table] tbody tr');
			const c = (i) => row.children[i];
			return {
				orderHref: c(0).querySelector("a").getAttribute("href"),
				hint: c(0).querySelector(".hint").title,
				status: c(1).querySelector(".badge").className + " " + c(1).innerText,
				money: c(2).innerText,
				number: c(3).innerText, numberTitle: c(3).querySelector(".fmt").title,
				duration: c(4).innerText, bytes: c(5).innerText,
				stamp: c(6).innerText, stampTitle: c(6).querySelector(".fmt").title,
				customerLinks: c(7).querySelectorAll("a").length, kindLinks: c(9).querySelectorAll("a").length,
				text: document.querySelector("main").innerText };
		})()`, &got)
		checks := []struct{ name, got, want string }{
			{"link percent-encodes the value", got.OrderHref, "https://shop.example.com/orders/A%2F1%20b"},
			{"hint", got.Hint, "customer acme"},
			{"badge", got.Status, "badge badge-green paid"},
			{"custom renderer", got.Money, "$12345.67"},
			{"number format", got.Number, "1,234,567"},
			{"raw value on hover", got.NumberTitle, "1234567"},
			{"duration_ms format", got.Duration, "1m 23s"},
			{"bytes format", got.Bytes, "1.5 KiB"},
			{"timestamp in local time", got.Stamp, "2024-05-01 14:34:56.789"},
		}
		for _, c := range checks {
			if c.got != c.want {
				t.Errorf("%s = %q, want %q", c.name, c.got, c.want)
			}
		}
		if !strings.Contains(got.StampTitle, "2024-05-01 12:34:56.789 UTC") {
			t.Errorf("timestamp hover = %q, want the UTC time", got.StampTitle)
		}
		if got.CustomerLinks != 0 || got.KindLinks != 0 {
			t.Errorf("unresolved links rendered as anchors (missing base %d, missing row field %d)", got.CustomerLinks, got.KindLinks)
		}
		for _, want := range []string{"explode me", "unsupported view 'heatmap'", "unsupported source 'traces'", "paid", "ok"} {
			if !strings.Contains(got.Text, want) {
				t.Errorf("showcase lacks %q", want)
			}
		}
		// Table widgets refresh over /ws: a probe's annotation adds a row.
		rows := p.str(`String(document.querySelectorAll('[data-view=table] tbody tr').length)`)
		req, _ := http.NewRequest("POST", w.base+"/api/v1/debug/probe", strings.NewReader(`{"payload":"{\"order\":7}"}`))
		req.Header.Set("Authorization", "Bearer "+browserToken)
		if r, err := http.DefaultClient.Do(req); err != nil || r.StatusCode != 200 {
			t.Fatalf("probe for a live row: %v %v", r, err)
		} else {
			r.Body.Close()
		}
		p.waitFor(fmt.Sprintf(`document.querySelectorAll('[data-view=table] tbody tr').length > %s`, rows), "a live row from the new annotation")
		if ws := warnings(p, "'explode' threw"); len(ws) != 1 {
			t.Errorf("renderer warnings = %q, want exactly one", ws)
		}
		shot(p, "declared-page")
		checkPage(t, p, false)
	})

	t.Run("every page renders without console errors", func(t *testing.T) {
		p := open(t, "/live")
		p.waitFor(`document.querySelectorAll("table.live tbody tr").length >= 8`, "live rows")
		p.click(`.toolbar button`, "Events")
		p.waitFor(`document.querySelector("table.live").innerText.includes("executor_finished")`, "live events")
		p.click(`.toolbar button`, "Tasks")
		if err := p.eval(`document.querySelector("table.live tbody tr .badge-green").closest("tr").focus()`, nil); err != nil {
			t.Fatal(err)
		}
		p.key("Enter")
		p.waitFor(`document.querySelector("#detail-panel")`, "the panel opened with Enter")
		p.waitFor(`document.querySelector("#detail-panel").innerText.includes("stdout tail")`, "the stdout tail of an ok task")
		p.key("Escape")
		p.waitFor(`!document.querySelector("#detail-panel")`, "the panel closed with Escape")
		p.click("#nav a", "History")
		p.waitFor(`document.querySelectorAll("table.grid tbody tr").length >= 1 && document.body.innerText.includes("live/orders-1")`, "the databases")
		p.click("#nav a", "Debug")
		p.click(`button[data-tab="kafka"]`, "Kafka")
		// An exactly-once worker's browser shows what read_committed
		// consumers see by default.
		p.waitFor(`document.querySelector("#kafka-isolation") && document.querySelector("#kafka-isolation").value === "read_committed"`, "the committed-only view by default")
		p.click("#kafka-read", "Read")
		p.waitFor(`document.querySelectorAll("table.records tbody tr").length >= 8`, "Kafka records")
		shot(p, "kafka")
		// The sink topic, written in transactions, reads committed too.
		if err := p.eval(`(() => { const s = document.querySelector("#kafka-alias"); s.value = "results"; s.dispatchEvent(new Event("change")); })()`, nil); err != nil {
			t.Fatal(err)
		}
		p.click("#kafka-read", "Read")
		p.waitFor(`[...document.querySelectorAll("table.records tbody tr")].length >= 1 && [...document.querySelectorAll("table.records tbody tr")].every((r) => r.textContent.includes("svc-worker"))`, "committed sink records")
		p.click(`button[data-tab="config"]`, "Config")
		p.waitFor(`document.body.innerText.includes("auth_token")`, "the config")
		if strings.Contains(p.text(), browserToken) {
			t.Error("the config tab shows the UI token")
		}
		p.click(`button[data-tab="runtime"]`, "Runtime")
		p.waitFor(`document.body.innerText.match(/Runtime health|not available/)`, "the runtime tab")
		p.click("#nav a", "Showcase")
		p.waitFor(`document.querySelector(".stat")`, "the declared page from the nav")
		checkPage(t, p, false)
		// The not-found page is a 404 document by design (the browser logs
		// that status), so it is checked on its own.
		nf := b.newPage(t)
		nf.navigate(w.base + "/no-such-page?token=" + browserToken)
		nf.waitFor(`document.body.innerText.includes("Not found")`, "the not-found page")
	})

	t.Run("live lists a batch frame's rows and says what a busy worker samples", func(t *testing.T) {
		// Frames as a worker at 5,000 tasks a second sends them, handed to
		// the page's own sockets (the worker in this test runs a shell
		// executor: it never gets that busy).
		p := b.newPage(t)
		p.must("Page.addScriptToEvaluateOnNewDocument", map[string]any{"source": `{
			const Native = window.WebSocket;
			window.__sockets = [];
			window.WebSocket = class extends Native { constructor(...a) { super(...a); window.__sockets.push(this); } };
		}`}, nil)
		p.navigate(w.base + "/live?token=" + browserToken)
		p.waitFor(`document.querySelector(".fleet-status [data-conn=live]")`, "a live socket")
		batch := `{"stream":"batch","data":[` + strings.Repeat(`{"stream":"events","data":{"id":1,"ts_ms":1,"type":"annotation","kind":"flood","task_id":"t-flood","worker":"orders-1","labels":{},"payload":{}}},`, 999) +
			`{"stream":"tasks","data":{"task_id":"t-batch-1","ts_ms":1,"worker":"orders-1","source":"http","alias":"","partition":-1,"offset":-1,"key":null,"labels":{},"status":"ok","attempts":1,"duration_ms":1,"error":"","output_size_bytes":1,"env":{}}}]}`
		sampled := `{"stream":"sampled","data":{"tasks":4900,"events":14900,"per_second":100,"sent":{"tasks":100,"events":100}}}`
		if err := p.eval(fmt.Sprintf(`for (const f of [%q, %q]) window.__sockets[0].onmessage({ data: f })`, batch, sampled), nil); err != nil {
			t.Fatal(err)
		}
		p.waitFor(`document.querySelector("table.live tbody").innerText.includes("t-batch-1")`, "the task row of the batch")
		p.waitFor(`document.querySelector(".sampled").textContent.includes("successful tasks: showing 1 in 50 at this rate")`, "the sampling note")
		if s := p.str(`document.querySelector(".sampled").textContent`); !strings.Contains(s, "routine events: showing 1 in 150") || !strings.Contains(s, "4,900 not listed") {
			t.Errorf("sampling note = %q, want the tasks' and routine events' shares and counts", s)
		}
		p.click(`.toolbar button`, "Events")
		if n := p.str(`String(document.querySelectorAll("table.live tbody tr").length)`); n != "500" {
			t.Errorf("events table has %s rows after a batch of 999 annotations, want 500 (the newest)", n)
		}
		checkPage(t, p, false)
	})
	t.Run("kill switches hide their sections", func(t *testing.T) { testKillSwitches(t, b, dir) })
	t.Run("untrusted card: no request, no token, listed as not trusted", func(t *testing.T) { testUntrustedCard(t, b, dir) })
	t.Run("link templates encode like the Go side", func(t *testing.T) { testTemplatesMatchGo(t, open(t, "/debug?tab=config")) })

	if *updateShots {
		files, _ := filepath.Glob(filepath.Join(dir, "*.png"))
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err == nil {
				err = os.WriteFile(filepath.Join(docsScreenshots, filepath.Base(f)), data, 0o600)
			}
			if err != nil {
				t.Errorf("update screenshot %s: %v", f, err)
			}
		}
	}
}
