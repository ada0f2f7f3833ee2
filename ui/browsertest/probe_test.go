package browsertest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"svc/worker/workertest/wait"
)

// metricSum sums the samples of a metric family of the worker whose
// labels include want.
func metricSum(t *testing.T, w *uiWorker, name string, want map[string]string) float64 {
	t.Helper()
	var m struct {
		Families []struct {
			Name    string `json:"name"`
			Samples []struct {
				Labels map[string]string `json:"labels"`
				Value  float64           `json:"value"`
			} `json:"samples"`
		} `json:"families"`
	}
	code, body := w.get(t, "/api/v1/debug/metrics")
	if code != 200 || json.Unmarshal([]byte(body), &m) != nil {
		t.Fatalf("metrics = %d %s", code, body)
	}
	var sum float64
	for _, f := range m.Families {
		if f.Name != name {
			continue
		}
	samples:
		for _, s := range f.Samples {
			for k, v := range want {
				if s.Labels[k] != v {
					continue samples
				}
			}
			sum += s.Value
		}
	}
	return sum
}

// TestProbesAreNotTrafficInTheBrowser: a failing probe run from the Probe
// tab shows its failure there, and the Dashboard, open while it ran and
// loaded afresh afterwards, does not count it: the outcome counts stay,
// Recent failures does not list it, Requests by source has no probe row.
// (Issue 20 item 7.) The open Dashboard is checked after a consume pause
// it shows as paused: the pause's state frame came after the probe's
// task frame on its socket, so the probe's frame has been handled.
func TestProbesAreNotTrafficInTheBrowser(t *testing.T) {
	bin := chromiumOrSkip(t)
	b := startBrowser(t, bin)
	w := startKafkaWorker(t)
	open := func(path string) *page { return openWithToken(t, b, w.base+path) }
	post := func(path, body string) {
		t.Helper()
		req, _ := http.NewRequest("POST", w.base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+browserToken)
		r, err := http.DefaultClient.Do(req)
		if err != nil || r.StatusCode != 200 {
			t.Fatalf("POST %s: %v %v", path, r, err)
		}
		r.Body.Close()
	}
	failedTasks := metricSum(t, w, "svc_tasks_total", map[string]string{"status": "failed"})
	failedProbes := metricSum(t, w, "svc_probe_tasks_total", map[string]string{"status": "failed"})
	if failedTasks == 0 {
		t.Fatal("the worker has no failed task: the Dashboard would have nothing to keep apart")
	}

	dashboardShows := func(p *page) (failed, failures, sources string) {
		p.waitFor(`document.querySelector("[data-outcome=failed]") && document.querySelector("ul.failures a.task-link")`, "the outcome counts and recent failures")
		return p.str(`document.querySelector("[data-outcome=failed]").innerText.trim()`),
			p.str(`document.querySelector("ul.failures").innerText`),
			p.str(`[...[...document.querySelectorAll("section.card")].find((c) => c.querySelector("h2").textContent === "Requests by source").querySelectorAll("tbody th")].map((th) => th.innerText).join(" ")`)
	}
	dash := open("/")
	failedBefore, _, _ := dashboardShows(dash)
	if failedBefore != fmt.Sprintf("failed %.0f", failedTasks) {
		t.Errorf("Dashboard failed count = %q, want %.0f", failedBefore, failedTasks)
	}

	probe := open("/debug?tab=probe")
	probe.fill("#probe-payload", `{"order":99,"customer":"initech","note":"please fail"}`)
	probe.click("#probe-run", "Run")
	probe.waitFor(`document.querySelector(".probe-result[data-status=failed]")`, "the probe failing on the Probe tab")
	probeID := probe.str(`document.querySelector(".probe-result dd code").innerText`)
	if s := probe.str(`document.querySelector(".probe-result").innerText`); !strings.Contains(s, "payment declined") {
		t.Errorf("probe result lacks the executor's stderr:\n%s", s)
	}
	checkPage(t, probe, false)
	wait.For(t, wait.Long, "the probe's failed task row recorded", func() (bool, string) {
		_, body := w.get(t, "/api/v1/live/task-results?limit=20")
		return strings.Contains(body, `"task_id":"`+probeID+`"`), body
	})
	if n := metricSum(t, w, "svc_probe_tasks_total", map[string]string{"status": "failed"}); n != failedProbes+1 {
		t.Errorf("svc_probe_tasks_total{status=failed} = %.0f, want %.0f", n, failedProbes+1)
	}

	post("/api/v1/debug/consume-pause", `{"duration_seconds":60}`)
	dash.waitFor(`[...document.querySelectorAll(".tile")].some((t) => t.querySelector("h2").textContent === "Intake" && t.querySelector(".big").textContent.includes("paused"))`,
		"the open Dashboard showing the pause that followed the probe")
	fresh := open("/")
	for name, p := range map[string]*page{"open while the probe ran": dash, "loaded afterwards": fresh} {
		failed, failures, sources := dashboardShows(p)
		if failed != failedBefore {
			t.Errorf("Dashboard %s: failed count %q, want %q as before the probe", name, failed, failedBefore)
		}
		if strings.Contains(failures, probeID) {
			t.Errorf("Dashboard %s lists the probe %s in Recent failures:\n%s", name, probeID, failures)
		}
		if strings.Contains(sources, "probe") || sources == "" {
			t.Errorf("Dashboard %s: rows of Requests by source are %q, want its sources without probe", name, sources)
		}
		checkPage(t, p, false)
	}
	post("/api/v1/debug/consume-resume", "")
}
