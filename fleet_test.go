package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"svc/worker/workertest"
	"svc/worker/workertest/wait"
)

// workerConfig is an HTTP-only worker with the recorder on disk.
func workerConfig(t *testing.T, name, storage, shared string, ui, in int) string {
	return workertest.WriteConfig(t, fmt.Sprintf(`
[worker]
name = %q
shutdown_timeout = "5s"
[metrics]
enabled = false
[ui]
port = %d
[storage]
dir = %q
[shared]
dir = %q
[history]
seal_interval = "1s"
[executor]
binary_path = "/bin/cat"
[sources.http]
enabled = true
host = "127.0.0.1"
port = %d
`, name, ui, storage, shared, in))
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	r, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	b, _ := io.ReadAll(r.Body)
	if r.StatusCode != 200 {
		t.Fatalf("GET %s = %d %s", url, r.StatusCode, b)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("GET %s: %v: %s", url, err, b)
	}
}

// Two worker processes mounting one shared folder see each other's sealed
// history, and one can trace a task the other ran.
func TestTwoWorkersShareHistory(t *testing.T) {
	t.Parallel()
	shared := t.TempDir()
	type w struct {
		name    string
		ui, in  int
		proc    *workertest.Proc
		taskIDs []string
	}
	ws := []*w{{name: "alpha"}, {name: "beta"}}
	for _, x := range ws {
		x.ui, x.in = freePort(t), freePort(t)
		x.proc = start(t, "run", "-config", workerConfig(t, x.name, filepath.Join(t.TempDir(), x.name), shared, x.ui, x.in))
	}
	for _, x := range ws {
		x.proc.WaitHTTP(t, fmt.Sprintf("http://127.0.0.1:%d/healthz", x.ui))
		var resp struct {
			Tasks []struct {
				TaskID string `json:"task_id"`
			} `json:"tasks"`
		}
		r, err := http.Post(fmt.Sprintf("http://127.0.0.1:%d/v1/process", x.in), "text/plain", strings.NewReader("from "+x.name))
		if err != nil {
			t.Fatal(err)
		}
		_ = json.NewDecoder(r.Body).Decode(&resp)
		r.Body.Close()
		x.taskIDs = append(x.taskIDs, resp.Tasks[0].TaskID)
	}
	type dbs struct {
		Databases []struct {
			Path, Kind, Worker string
		} `json:"databases"`
	}
	for i, x := range ws {
		other := ws[1-i]
		wait.For(t, wait.Long, x.name+" to list "+other.name+"'s sealed file", func() (bool, string) {
			var d dbs
			getJSON(t, fmt.Sprintf("http://127.0.0.1:%d/api/v1/debug/databases", x.ui), &d)
			for _, db := range d.Databases {
				if db.Worker == other.name && db.Kind == "sealed" && strings.HasPrefix(db.Path, "history/default/") {
					return true, ""
				}
			}
			return false, fmt.Sprintf("databases %+v", d.Databases)
		})
		wait.For(t, wait.Long, x.name+" to trace "+other.name+"'s task", func() (bool, string) {
			var tr struct {
				Events []struct {
					Type, Worker string
				} `json:"events"`
			}
			getJSON(t, fmt.Sprintf("http://127.0.0.1:%d/api/v1/debug/trace?task_id=%s", x.ui, other.taskIDs[0]), &tr)
			return len(tr.Events) >= 3 && tr.Events[0].Worker == other.name, fmt.Sprintf("events %+v", tr.Events)
		})
	}
	for _, x := range ws {
		_ = x.proc.Cmd.Process.Signal(syscall.SIGTERM)
		if code := x.proc.Wait(t); code != 0 {
			t.Errorf("%s exit = %d", x.name, code)
		}
	}
}

// A worker killed with SIGKILL leaves its watchdog file; the next start
// records crash_detected.
func TestCrashMarkerAfterSIGKILL(t *testing.T) {
	t.Parallel()
	storage, shared := t.TempDir(), t.TempDir()
	ui, in := freePort(t), freePort(t)
	cfg := workerConfig(t, "crashy", storage, shared, ui, in)
	p := start(t, "run", "-config", cfg)
	p.WaitHTTP(t, fmt.Sprintf("http://127.0.0.1:%d/healthz", ui))
	wait.For(t, wait.Long, "the watchdog file", func() (bool, string) {
		m, _ := filepath.Glob(filepath.Join(storage, "crashy.watchdog"))
		return len(m) == 1, fmt.Sprint("found ", m)
	})
	_ = p.Cmd.Process.Kill()
	p.Wait(t)

	p2 := start(t, "run", "-config", cfg)
	p2.WaitHTTP(t, fmt.Sprintf("http://127.0.0.1:%d/healthz", ui))
	var evs struct {
		Events []struct {
			Type    string          `json:"type"`
			Payload json.RawMessage `json:"payload"`
		} `json:"events"`
	}
	wait.For(t, wait.Long, "a crash_detected event", func() (bool, string) {
		getJSON(t, fmt.Sprintf("http://127.0.0.1:%d/api/v1/events?types=crash_detected", ui), &evs)
		return len(evs.Events) == 1, fmt.Sprintf("%d crash_detected events", len(evs.Events))
	})
	if !strings.Contains(string(evs.Events[0].Payload), "pid") {
		t.Errorf("crash_detected payload = %s, want what the watchdog said", evs.Events[0].Payload)
	}
	_ = p2.Cmd.Process.Signal(syscall.SIGTERM)
	if code := p2.Wait(t); code != 0 {
		t.Errorf("exit = %d", code)
	}
	if m, _ := filepath.Glob(filepath.Join(storage, "crashy.watchdog")); len(m) != 0 {
		t.Errorf("clean shutdown left the watchdog file: %v", m)
	}
}
