package browsertest

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRoughEdges asserts issue 41's rough edges fixed, in Chromium against
// a real Kafka worker: the Intake tile fits its card at 1280 px and speaks
// of what waits and what happens, not of W and max(); Requests by source
// adds up (probes left out of the rows and the total alike); the Runtime
// tab's raw JSON is what the routes answered ({"enabled":false,…}, not
// null); signing in keeps the deep link (/debug?tab=runtime opens the
// Runtime tab) and a refused token leaves the address bar; the Debug page
// keeps its tab in the address and opens it again from the navigation;
// the DLQ records route answers [] for no match. No console errors.
func TestRoughEdges(t *testing.T) {
	bin := chromiumOrSkip(t)
	dir := shots(t)
	b := startBrowser(t, bin)
	w := startKafkaWorker(t)

	// Two probes: counted by the recorder, not traffic.
	for range 2 {
		req, _ := http.NewRequest("POST", w.base+"/api/v1/debug/probe", strings.NewReader(`{"payload":"{\"order\":1}"}`))
		req.Header.Set("Authorization", "Bearer "+browserToken)
		r, err := http.DefaultClient.Do(req)
		if err != nil || r.StatusCode != 200 {
			t.Fatalf("probe: %v %v", r, err)
		}
		r.Body.Close()
	}

	t.Run("intake tile fits at 1280 px and speaks the operator's language", func(t *testing.T) {
		dash := openWithToken(t, b, w.base+"/")
		dash.viewport(1280, 800)
		dash.waitFor(`document.querySelector(".bp-words")`, "the Intake tile")
		// The lag tile's drain badge with its longest words fits too,
		// whatever state the group is in now.
		dash.waitFor(`document.querySelector(".tile [data-drain]")`, "the lag tile's drain badge")
		if err := dash.eval(`document.querySelector(".tile [data-drain]").textContent = "holding steady: as fast in as out"`, nil); err != nil {
			t.Fatal(err)
		}
		var over []string
		jsonOf(t, dash, `[...document.querySelectorAll(".tile")].filter((t) => t.scrollWidth > t.clientWidth + 1).map((t) => t.querySelector("h2").textContent + " " + t.scrollWidth + ">" + t.clientWidth)`, &over)
		if len(over) > 0 {
			t.Errorf("tiles wider than their card at 1280 px: %v", over)
		}
		if s := dash.str(`document.querySelector(".bp-words").innerText`); strings.Contains(s, "max(") || strings.Contains(s, "× W") || !strings.Contains(s, "messages waiting to run") {
			t.Errorf("Intake tile backpressure words = %q, want what waits in the operator's words (no W, no max())", s)
		}
		dash.screenshot(dir, "dashboard-1280")
		checkPage(t, dash, false)
	})

	t.Run("requests by source add up", func(t *testing.T) {
		dash := openWithToken(t, b, w.base+"/")
		dash.waitFor(`[...document.querySelectorAll("section.card h2")].some((h) => h.textContent === "Requests by source")`, "the request counts")
		var counts struct {
			Total int
			Rows  int
			Text  string
		}
		jsonOf(t, dash, `(() => { const c = [...document.querySelectorAll("section.card")].find((c) => c.querySelector("h2").textContent === "Requests by source");
			const n = (s) => Number(s.replace(/,/g, ""));
			return { total: n((c.querySelector("p.muted").textContent.match(/Total ([\d,]+)/) || [0, "-1"])[1]),
				rows: [...c.querySelectorAll("tbody tr")].reduce((a, r) => a + [...r.querySelectorAll("td")].reduce((b, d) => b + n(d.textContent), 0), 0),
				text: c.innerText }; })()`, &counts)
		if counts.Total != counts.Rows || counts.Total <= 0 || !strings.Contains(counts.Text, "2 debug probes not counted") {
			t.Errorf("Requests by source: total %d over rows summing to %d, want them equal and the 2 probes named as left out:\n%s", counts.Total, counts.Rows, counts.Text)
		}
		checkPage(t, dash, false)
	})

	t.Run("sign-in keeps the deep link and drops a refused token", func(t *testing.T) {
		p := b.newPage(t)
		p.navigate(w.base + "/debug?tab=runtime")
		p.waitFor(`document.querySelector("input[name=token]")`, "the sign-in form")
		p.fill("input[name=token]", "wrong-token-0123456789")
		p.click("button[type=submit]", "Sign in")
		p.waitFor(`document.body.innerText.includes("not accepted")`, "the refusal")
		if s := p.str("location.href"); strings.Contains(s, "token") || !strings.Contains(s, "tab=runtime") {
			t.Errorf("address bar after a refused token = %s, want no token and the deep link kept", s)
		}
		p.fill("input[name=token]", browserToken)
		p.click("button[type=submit]", "Sign in")
		p.waitFor(`document.querySelector("button[data-tab][aria-selected=true]")`, "the Debug page after sign-in")
		if s := p.str(`document.querySelector("button[data-tab][aria-selected=true]").dataset.tab + " " + location.pathname + location.search`); s != "runtime /debug?tab=runtime" {
			t.Errorf("tab and address after sign-in = %s, want the Runtime tab at /debug?tab=runtime", s)
		}
		checkPage(t, p, true)
	})

	t.Run("runtime raw JSON is what the routes answered", func(t *testing.T) {
		p := openWithToken(t, b, w.base+"/debug?tab=runtime")
		p.click("button.raw-toggle", "Show raw JSON")
		p.waitFor(`document.querySelector("#runtime-raw") && !document.querySelector("#runtime-raw").hidden && document.querySelectorAll("#runtime-raw pre, #runtime-raw p").length === 2`, "the raw JSON")
		var raws []string
		jsonOf(t, p, `[...document.querySelectorAll("#runtime-raw pre, #runtime-raw p")].map((e) => e.textContent)`, &raws)
		_, tp := w.get(t, "/api/v1/debug/throughput")
		if !strings.Contains(tp, `"enabled":false`) {
			t.Fatalf("throughput route = %s, want it off on this worker", tp)
		}
		if len(raws) != 2 || strings.TrimSpace(raws[1]) == "null" || !strings.Contains(raws[1], `"enabled": false`) {
			t.Errorf("raw JSON shown = %q, want the throughput route's answer %s", raws, tp)
		}
		checkPage(t, p, false)
	})

	t.Run("debug keeps its tab", func(t *testing.T) {
		p := openWithToken(t, b, w.base+"/debug?tab=config")
		p.click(`button[data-tab="kafka"]`, "Kafka")
		p.waitFor(`location.search === "?tab=kafka"`, "the Kafka tab in the address")
		p.click("#nav a", "Dashboard")
		p.waitFor(`location.pathname === "/" && document.querySelector(".tile")`, "the Dashboard")
		p.click("#nav a", "Debug")
		p.waitFor(`document.querySelector("button[data-tab][aria-selected=true]")`, "the Debug page")
		if s := p.str(`document.querySelector("button[data-tab][aria-selected=true]").dataset.tab + " " + location.search`); s != "kafka ?tab=kafka" {
			t.Errorf("Debug from the navigation opened %s, want the Kafka tab it was left on", s)
		}
		checkPage(t, p, false)
	})

	t.Run("dlq records answer [] for no match", func(t *testing.T) {
		if code, body := w.get(t, "/api/v1/debug/dlq/records?key=no-such-key"); code != 200 || !strings.Contains(body, `"records":[]`) {
			t.Errorf("dlq/records with no match = %d %.200s, want \"records\":[]", code, body)
		}
	})
	if *updateShots {
		data, err := os.ReadFile(filepath.Join(dir, "dashboard-1280.png"))
		if err == nil {
			err = os.WriteFile(filepath.Join(docsScreenshots, "dashboard-1280.png"), data, 0o600)
		}
		if err != nil {
			t.Errorf("update screenshot dashboard-1280: %v", err)
		}
	}
}
