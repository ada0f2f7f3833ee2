package browsertest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"svc/worker/workertest/wait"
)

// produceTo sends n quick messages to each of the partitions.
func produceTo(t *testing.T, cl *kgo.Client, parts []int32, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for _, p := range parts {
		for i := range n {
			rec := &kgo.Record{Partition: p, Key: []byte(fmt.Sprintf("lag-%d-%d", p, i)), Value: []byte(fmt.Sprintf(`{"p":%d,"i":%d,"say":"quick"}`, p, i))}
			if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestLagAndTrends runs the fleet of three real workers and checks, in
// Chromium, what an operator sees of the consumer lag and the trends:
// while alpha's intake is paused from its Pause tab and messages arrive
// on its partitions, the Dashboard's Consumer lag tile and the Pause
// tab's table of every partition of the group show the lag growing round
// after round (alpha's partitions paused, the others' owned by beta and
// gamma and flowing), and back to 0 after Resume; the Dashboard draws
// the fleet's throughput, failures and lag trends as SVG charts with
// data points, lets the operator show one worker alone, and links the
// group's lag in Prometheus; no console error on either page.
func TestLagAndTrends(t *testing.T) {
	bin := chromiumOrSkip(t)
	dir := shots(t)
	b := startBrowser(t, bin)
	cl, ws := startFleet(t)
	alpha := ws[0]
	open := func(path string) *page { return openWithToken(t, b, alpha.base+path) }

	// alpha's own partitions, as its group view says once the group
	// settled on the three workers.
	var mine []int32
	wait.For(t, wait.Long, "the group view of alpha: 4 partitions, each owned by one of the three workers", func() (bool, string) {
		code, body := alpha.get(t, "/api/v1/debug/kafka/group")
		var g struct {
			Parts []struct {
				Partition int32 `json:"partition"`
				Mine      bool  `json:"mine"`
				Owner     *struct {
					Worker string `json:"worker"`
				} `json:"owner"`
			} `json:"group_partitions"`
		}
		if code != 200 || json.Unmarshal([]byte(body), &g) != nil || len(g.Parts) != 4 {
			return false, fmt.Sprintf("%d %s", code, body)
		}
		mine = nil
		owners := map[string]bool{}
		for _, p := range g.Parts {
			if p.Owner == nil {
				return false, body
			}
			owners[p.Owner.Worker] = true
			if p.Mine {
				mine = append(mine, p.Partition)
			}
		}
		return len(owners) == 3 && len(mine) > 0, body
	})
	t.Logf("alpha owns partitions %v", mine)

	dash := open("/")
	dash.waitFor(`document.querySelector(".lag-tile .big[data-lag='0']")`, "the Consumer lag tile at 0")
	dash.waitFor(`document.querySelector("svg.chart[data-chart=trend-throughput]") && document.querySelector("svg.chart[data-chart=trend-lag]")`, "the trend charts")
	// The bound on the first load, with the lag and trend modules
	// and the chart helper it loads after the first paint.
	var size float64
	jsonOf(t, dash, `performance.getEntriesByType("navigation").concat(performance.getEntriesByType("resource")).filter((e) => !e.name.includes("/api/")).reduce((a, e) => a + (e.decodedBodySize || 0), 0)`, &size)
	if size == 0 || size > 100*1024 {
		t.Errorf("first load of the dashboard = %.0f bytes, want under 100 KiB", size)
	}
	t.Logf("first load of the dashboard (pages, scripts, styles): %.1f KiB", size/1024)
	pause := open("/debug?tab=pause")
	pause.waitFor(`document.querySelectorAll("table.lag-table tbody tr").length === 4`, "the Pause tab's lag table of the 4 partitions")
	pause.click("button.preset", "Pause 300s")
	pause.waitFor(`document.querySelector(".pause-state") && document.querySelector(".pause-state").innerText.includes("Paused.")`, "alpha paused")

	tileLag := func() int {
		n, _ := strconv.Atoi(dash.str(`document.querySelector(".lag-tile .big").dataset.lag`))
		return n
	}
	last := 0
	for round := 1; round <= 3; round++ {
		produceTo(t, cl, mine, 3)
		want := 3 * round * len(mine)
		dash.waitFor(fmt.Sprintf(`Number(document.querySelector(".lag-tile .big").dataset.lag) >= %d`, want), fmt.Sprintf("round %d: the tile's lag at %d or more", round, want))
		pause.waitFor(fmt.Sprintf(`Number(document.querySelector(".lag-total [data-lag]").dataset.lag) >= %d && [%s].every((p) => {
			const r = document.querySelector("table.lag-table tr[data-partition='" + p + "']");
			return r && r.dataset.state === "paused" && Number(r.dataset.lag) >= %d; })`, want, joinParts(mine), 3*round),
			fmt.Sprintf("round %d: the Pause tab's total at %d or more, alpha's partitions paused with their lag", round, want))
		got := tileLag()
		if got <= last {
			t.Errorf("round %d: the tile's lag %d did not grow from %d", round, got, last)
		}
		last = got
	}
	// The lag in time moves while the pause holds: the oldest waiting
	// message of alpha's partitions gets older at each read, and the
	// partitions say they are not consuming.
	first := fmt.Sprintf(`Number(document.querySelector("table.lag-table tr[data-partition='%d']").dataset.lagSeconds || 0)`, mine[0])
	pause.waitFor(first+` > 0`, "a lag in time on alpha's first partition")
	var before float64
	jsonOf(t, pause, first, &before)
	pause.waitFor(fmt.Sprintf(`%s > %v && document.querySelector("table.lag-table tr[data-partition='%d'] [data-drain=not_consuming]")`, first, before, mine[0]),
		"the lag in time growing while the pause holds, the partition not consuming")
	dash.waitFor(`Number(document.querySelector(".lag-tile .lag-seconds").dataset.lagSeconds) > 0 && document.querySelector(".lag-tile .lag-seconds").textContent.endsWith("behind")`,
		"the tile's lag in time during the pause")
	var others []string
	jsonOf(t, pause, `[...document.querySelectorAll("table.lag-table tbody tr")].filter((r) => !r.innerText.includes("this worker")).map((r) => r.children[1].innerText + " " + r.dataset.state)`, &others)
	if len(others) != 4-len(mine) {
		t.Errorf("rows of other workers' partitions = %v, want %d", others, 4-len(mine))
	}
	for _, o := range others {
		if !(strings.HasPrefix(o, "beta") || strings.HasPrefix(o, "gamma")) || !strings.HasSuffix(o, "flowing") {
			t.Errorf("another worker's partition row = %q, want owned by beta or gamma and flowing (from its card)", o)
		}
	}
	if s := dash.str(`document.querySelector(".lag-tile").innerText`); !strings.Contains(s, "4 partitions of group svc-fleet") || !strings.Contains(s, "paused") {
		t.Errorf("the lag tile says %q, want the group's 4 partitions and the paused ones", s)
	}
	// The trend keeps what the pause did: the worker samples the lag every
	// 10 s, so the fleet's lag chart rises to the pause's lag.
	lagTop := fmt.Sprintf(`Number(((document.querySelector("svg.chart[data-chart=trend-lag]") || {getAttribute: () => ""}).getAttribute("aria-label").match(/up to ([\d,]+)/) || [0, "0"])[1].replace(/,/g, "")) >= %d`, 3*len(mine))
	dash.waitFor(lagTop, "the lag trend rising to the pause's lag")
	dash.waitFor(`document.querySelector(".lag-tile svg.chart[data-chart=lag-trend] circle")`, "the tile's own lag trend")
	pause.must("Runtime.evaluate", map[string]any{"expression": `document.querySelector("table.lag-table").scrollIntoView({block: "center"})`}, nil)
	pause.screenshot(dir, "lag")
	dash.screenshot(dir, "lag-dashboard")

	pause.click("#resume", "Resume now")
	dash.waitFor(`document.querySelector(".lag-tile .big").dataset.lag === "0"`, "the tile's lag back to 0 after the resume")
	pause.waitFor(`document.querySelector(".lag-total [data-lag]").dataset.lag === "0" && [...document.querySelectorAll("table.lag-table tbody tr")].every((r) => r.dataset.lag === "0" && r.dataset.lagSeconds === "0" && r.dataset.state === "flowing")`,
		"the Pause tab's partitions at lag 0, up to date and flowing after the resume")
	pause.waitFor(fmt.Sprintf(`document.querySelector("table.lag-table tr[data-partition='%d'] [data-drain=caught_up]")`, mine[0]), "alpha's first partition caught up after the resume")

	// Trends: the fleet's three charts with data points, the lag having
	// risen on the lag chart; one worker alone on demand.
	dash.waitFor(`(() => { const l = document.querySelector("svg.chart[data-chart=trend-lag] polyline"); const t = document.querySelector("svg.chart[data-chart=trend-throughput] polyline");
		return l && t && Number(l.dataset.n) >= 2 && Number(t.dataset.n) >= 2 && document.querySelector("svg.chart[data-chart=trend-failures] circle"); })()`, "trend charts of two points or more")
	// Each trend chart labels its time axis: the window's start and end.
	var axes []string
	jsonOf(t, dash, `[...document.querySelectorAll(".charts.trends .chart-axis")].map((a) => a.innerText.replace(/\s+/g, " ").trim())`, &axes)
	if len(axes) != 3 {
		t.Errorf("trend time axes = %q, want one under each of the 3 charts", axes)
	}
	for _, a := range axes {
		if !regexp.MustCompile(`^\d\d:\d\d.* \d\d:\d\d`).MatchString(a) {
			t.Errorf("trend time axis %q, want its start and end times (hh:mm)", a)
		}
	}
	var views []string
	jsonOf(t, dash, `[...document.querySelectorAll("#trends-view option")].map((o) => o.value)`, &views)
	if strings.Join(views, ",") != "fleet,alpha,beta,gamma" {
		t.Errorf("trend views = %v, want fleet and each of the three workers", views)
	}
	if s := dash.str(`document.querySelector(".trends-box").innerText`); strings.Contains(s, "Not included") || !strings.Contains(s, "360 points") {
		t.Errorf("trends note = %q, want every worker included and the bound stated", s)
	}
	dash.fill("#trends-view", "beta")
	dash.waitFor(`document.querySelector(".charts.trends[data-view=beta] svg.chart[data-chart=trend-throughput]")`, "beta's trends alone")
	dash.fill("#trends-view", "fleet")
	dash.waitFor(`document.querySelector(".charts.trends[data-view=fleet]")`, "the fleet's trends again")

	href := dash.str(`[...document.querySelectorAll("a[target=_blank]")].find((a) => a.textContent === "Consumer lag").href`)
	u, err := url.Parse(href)
	if err != nil {
		t.Fatal(err)
	}
	wantExpr := `sum by (group, partition) (svc_consumer_lag{group="svc-fleet"} or svc_consumer_lag_orphaned{group="svc-fleet"})`
	if got := u.Query().Get("g0.expr"); got != wantExpr {
		t.Errorf("Consumer lag link query = %s, want %s", got, wantExpr)
	}
	dash.must("Runtime.evaluate", map[string]any{"expression": `document.querySelector(".trends-box").scrollIntoView({block: "start"})`}, nil)
	dash.screenshot(dir, "trends")
	checkPage(t, dash, false)
	checkPage(t, pause, false)

	if *updateShots {
		for _, name := range []string{"lag", "trends"} {
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

// joinParts renders partitions as a JavaScript array's elements.
func joinParts(ps []int32) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = strconv.Itoa(int(p))
	}
	return strings.Join(s, ",")
}
