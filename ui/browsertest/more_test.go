package browsertest

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"svc/ui"
	"svc/ui/release"
)

// testKillSwitches opens a worker with every kill switch off: their
// sections are gone with a note naming each key. Then tasks keep coming
// while Live is open: the table keeps at most 500 rows and the page stays
// responsive.
func testKillSwitches(t *testing.T, b *browser, dir string) {
	lw := startLockedDownWorker(t)
	p := b.newPage(t)
	p.navigate(lw.base + "/debug")
	p.waitFor(`document.querySelector(".off-key")`, "the turned-off note")
	var tabs []string
	jsonOf(t, p, `[...document.querySelectorAll("[role=tab]")].map((b) => b.dataset.tab)`, &tabs)
	if strings.Join(tabs, ",") != "config,runtime" {
		t.Errorf("debug tabs = %v, want only config and runtime", tabs)
	}
	off := p.str(`[...document.querySelectorAll(".off-key")].map((e) => e.textContent).join(" ")`)
	for _, key := range []string{"ui.probe_enabled", "ui.kafka_read_enabled", "ui.consume_pause.enabled"} {
		if !strings.Contains(off, key) {
			t.Errorf("note %q does not name %s", off, key)
		}
	}
	p.screenshot(dir, "kill-switches")
	p.click("#nav a", "History")
	p.waitFor(`document.querySelector("#merge-off")`, "the merge note")
	if s := p.str(`document.querySelector("#merge-off").textContent`); !strings.Contains(s, "ui.merge_enabled") {
		t.Errorf("merge note = %q", s)
	}
	p.click("#nav a", "Dashboard")
	p.waitFor(`document.body.innerText.includes("Memory-only recorder")`, "the memory-only note on the request counts")
	checkPage(t, p, false)

	// Tasks keep coming while Live is open: the table keeps at most 500
	// rows, newest first, and the page stays responsive. A subscriber is
	// sent at most recorder.LiveRoutinePerSecond routine rows a second, so
	// the table fills in about five seconds however fast the tasks run:
	// the senders go on until it is full and a second longer.
	p.click("#nav a", "Live")
	p.waitFor(`document.querySelector("table.live tbody tr") && document.body.innerText.includes("1/1 live")`, "Live connected")
	var wg sync.WaitGroup
	stop := make(chan struct{})
	stopSenders := sync.OnceFunc(func() { close(stop); wg.Wait() })
	defer stopSenders() // also when a wait below fails the test
	var sent atomic.Int64
	for range 16 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				i := sent.Add(1)
				r, err := http.Post(lw.ingress+"/v1/process", "text/plain", strings.NewReader(fmt.Sprintf("burst %d", i)))
				if err == nil {
					r.Body.Close()
				}
				time.Sleep(5 * time.Millisecond)
			}
		})
	}
	p.waitFor(`document.querySelectorAll("table.live tbody tr").length === 500`, "the Live table capped at 500 rows")
	time.Sleep(1500 * time.Millisecond) // more rows arrive: the table stays at its cap
	stopSenders()
	var n int
	if err := p.eval(`document.querySelectorAll("table.live tbody tr").length`, &n); err != nil || n != 500 {
		t.Errorf("the Live table holds %d rows (%v) after %d tasks, want its cap of 500", n, err, sent.Load())
	}
	var ok bool
	if err := p.eval(`new Promise((done) => requestAnimationFrame(() => done(true)))`, &ok); err != nil || !ok {
		t.Errorf("page unresponsive after the burst: %v", err)
	}
	p.screenshot(dir, "live-burst")
	checkPage(t, p, false)
}

// testTemplatesMatchGo checks the UI's percent-encoding and link
// template expansion on tricky inputs (the rules of ui.Template).
func testTemplatesMatchGo(t *testing.T, p *page) {
	p.waitFor(`document.body.innerText.includes("effective configuration")`, "the page")
	encoded := map[string]string{
		"plain": "plain", "a/b c": "a%2Fb%20c", "100%": "100%25", "ü€😀": "%C3%BC%E2%82%AC%F0%9F%98%80",
		"?&=#+": "%3F%26%3D%23%2B", "!'()*~._-": "%21%27%28%29%2A~._-", "{row.x}": "%7Brow.x%7D", "": "",
	}
	inputs := slices.Sorted(maps.Keys(encoded))
	var got []string
	in, _ := json.Marshal(inputs)
	jsonOf(t, p, fmt.Sprintf(`import(%q).then((m) => %s.map(m.percentEncode))`, release.AssetsPath(ui.EmbeddedTag)+"/render.js", in), &got)
	for i, s := range inputs {
		if want := encoded[s]; i >= len(got) || got[i] != want {
			t.Errorf("percentEncode(%q) in the browser = %q, want %q", s, got, want)
		}
	}
	type expandCase struct {
		Tpl   string            `json:"tpl"`
		Value any               `json:"value"`
		Row   map[string]any    `json:"row"`
		Bases map[string]string `json:"bases"`
		want  string            // "" for unresolved
	}
	cases := []expandCase{
		{"{shop}/o/{value}", "A/1 b", nil, map[string]string{"shop": "https://s.example.com/"}, "https://s.example.com/o/A%2F1%20b"},
		{"{shop}/o/{row.id}?q={value}", 42.5, map[string]any{"id": "x y"}, map[string]string{"shop": "https://s.example.com"},
			"https://s.example.com/o/x%20y?q=42.5"},
		{"{wiki}/{value}", "x", nil, map[string]string{}, ""},
		{"/local/{row.missing}", "x", map[string]any{}, nil, ""},
		{"https://x.example.com/{value}", true, nil, nil, "https://x.example.com/true"},
		{"{value}", "javascript:alert(1)", nil, nil, ""},
	}
	for _, c := range cases {
		arg, _ := json.Marshal(c)
		var js *string
		jsonOf(t, p, fmt.Sprintf(`import(%q).then((m) => { const c = %s; return m.expand(c.tpl, {value: c.value, row: c.row, bases: c.bases}, true); })`, release.AssetsPath(ui.EmbeddedTag)+"/render.js", arg), &js)
		switch {
		case c.want == "" && js != nil:
			t.Errorf("expand(%q) in the browser = %q, want unresolved", c.Tpl, *js)
		case c.want != "" && (js == nil || *js != c.want):
			t.Errorf("expand(%q) in the browser = %v, want %q", c.Tpl, js, c.want)
		}
	}
}
