package browsertest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"svc/worker/workertest/wait"
)

// TestFleetTrace runs a fleet of real workers sharing a folder and a
// kfake broker and checks, in Chromium, that a trace on one worker finds
// a task another worker ran and has not sealed yet (it is in that
// worker's live file only): from Live, the task panel's "Open the full
// trace in History" of beta's task shows its events on alpha's History
// page, named as searched in beta's live file; after gamma is killed, a
// trace on alpha still shows beta's events and says gamma's live file
// was not searched, and why. No console errors.
func TestFleetTrace(t *testing.T) {
	bin := chromiumOrSkip(t)
	dir := shots(t)
	b := startBrowser(t, bin)
	cl, ws := startFleet(t)
	alpha, beta, gamma := ws[0], ws[1], ws[2]
	open := func(path string) *page { return openWithToken(t, b, alpha.base+path) }
	wait.For(t, wait.Long, "alpha lists the three workers running, each owning a partition", func() (bool, string) {
		l, owners := workersOf(t, alpha), 0
		for _, w := range l.Workers {
			if w.State == "running" && w.Load != nil && w.Load.Partitions != nil && *w.Load.Partitions > 0 {
				owners++
			}
		}
		return owners == 3, fmt.Sprintf("%+v", l)
	})

	live := open("/live")
	live.waitFor(`document.body.innerText.includes("3/3 live")`, "Live streaming from the three workers")
	produce(t, cl, 12, "quick")
	live.waitFor(`[...document.querySelectorAll("table.live tbody tr[data-task]")].some((r) => r.children[1].innerText.trim() === "beta")`, "a task of beta on alpha's Live")
	taskID := live.str(`[...document.querySelectorAll("table.live tbody tr[data-task]")].find((r) => r.children[1].innerText.trim() === "beta").dataset.task`)
	if code, body := alpha.get(t, "/api/v1/debug/databases"); code != 200 || strings.Contains(body, `"kind":"sealed","worker":"beta"`) || strings.Contains(body, `"kind":"archive"`) {
		t.Fatalf("databases = %d %s: the test needs beta's task unsealed", code, body)
	}
	// Live shows a task as it finishes; its row reaches beta's live file
	// when the writer stores it, within about a second (a Kafka task's row
	// waits up to a second for its deliveries to be folded in).
	var own struct {
		Events []struct{ Type, Worker string } `json:"events"`
	}
	wait.For(t, wait.Long, "beta's own live trace of "+taskID+" with its delivery", func() (bool, string) {
		own.Events = nil
		code, body := beta.get(t, "/api/v1/debug/trace?scope=local&task_id="+taskID)
		ok := code == 200 && json.Unmarshal([]byte(body), &own) == nil && len(own.Events) >= 3
		delivered := ok && slices.ContainsFunc(own.Events, func(e struct{ Type, Worker string }) bool { return e.Type == "sink_delivered" })
		return delivered, fmt.Sprintf("%d %s", code, body)
	})
	// The task is in beta's live file only: alpha's own files know nothing.
	code, body := alpha.get(t, "/api/v1/debug/trace?scope=local&task_id="+taskID)
	if code != 200 || !strings.Contains(body, `"events":[]`) {
		t.Fatalf("alpha's own trace of beta's task = %d %s, want no events", code, body)
	}

	live.click(fmt.Sprintf(`tr[data-task=%q]`, taskID), "beta")
	live.click("a.trace-link", "Open the full trace")
	live.waitFor(`location.pathname === "/history" && document.querySelectorAll("table.trace tbody tr").length > 0`, "alpha's History page tracing beta's task")
	var rows []struct{ Worker, Type string }
	readRows := func(p *page) {
		jsonOf(t, p, `[...document.querySelectorAll("table.trace tbody tr")].map((r) => ({ worker: r.children[1].innerText.trim(), type: r.children[2].innerText.trim() }))`, &rows)
	}
	readRows(live)
	var types []string
	for _, r := range rows {
		types = append(types, r.Type)
		if r.Worker != "beta" {
			t.Errorf("trace row of worker %q, want beta's: %+v", r.Worker, r)
		}
	}
	if len(rows) != len(own.Events) || !slices.Contains(types, "task_received") || !slices.Contains(types, "executor_finished") || !slices.Contains(types, "sink_delivered") {
		t.Errorf("History on alpha shows %v, want beta's %d events (received, executed, delivered)", types, len(own.Events))
	}
	if s := live.str(`document.querySelector(".trace-sources").innerText`); s != "alpha, beta, gamma" {
		t.Errorf("live files searched = %q, want alpha, beta, gamma", s)
	}
	checkPage(t, live, false)

	// gamma dies: a trace on alpha still shows beta's task, and says
	// gamma's live file was not searched, and why.
	if err := gamma.proc.Cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	gamma.proc.Wait(t)
	wait.For(t, wait.Long, "alpha listing gamma unreachable", func() (bool, string) {
		for _, w := range workersOf(t, alpha).Workers {
			if w.Name == "gamma" {
				return w.State == "unreachable", w.State
			}
		}
		return false, "gamma not listed"
	})
	hist := open("/history?task_id=" + taskID)
	hist.waitFor(`document.querySelectorAll("table.trace tbody tr").length > 0 && document.querySelector(".trace-missing li[data-worker=gamma]")`, "beta's task traced on alpha, gamma listed as not searched")
	readRows(hist)
	if len(rows) != len(own.Events) {
		t.Errorf("trace with gamma dead shows %d events, want beta's %d", len(rows), len(own.Events))
	}
	if s := hist.str(`document.querySelector(".trace-missing li[data-worker=gamma]").innerText`); !strings.Contains(s, "unreachable") {
		t.Errorf("gamma's note = %q, want it unreachable", s)
	}
	if s := hist.str(`document.querySelector(".trace-sources").innerText`); s != "alpha, beta" {
		t.Errorf("live files searched with gamma dead = %q, want alpha, beta", s)
	}
	hist.screenshot(dir, "trace-fleet")
	checkPage(t, hist, false)

	if *updateShots {
		data, err := os.ReadFile(filepath.Join(dir, "trace-fleet.png"))
		if err == nil {
			err = os.WriteFile(filepath.Join(docsScreenshots, "trace-fleet.png"), data, 0o600)
		}
		if err != nil {
			t.Errorf("update screenshot trace-fleet: %v", err)
		}
	}
}
