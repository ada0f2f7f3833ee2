package httpd

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"svc/recorder"
	"svc/worker"
	"svc/worker/config"
	"svc/worker/event"
	"svc/worker/workertest/wait"
)

// diskConfig is a stack config whose recorder writes real SQLite files:
// storage.dir and shared.dir under a temp dir.
func diskConfig(t *testing.T, binary string) *config.Config {
	cfg := testConfig(t, binary)
	root := t.TempDir()
	cfg.Storage.Dir = filepath.Join(root, "storage")
	cfg.Shared.Dir = filepath.Join(root, "shared")
	return cfg
}

func TestHistoryEventsTasksAndTrace(t *testing.T) {
	t.Parallel()
	exe := script(t, `cat >/dev/null
echo '{"annotation":{"kind":"billing.check","payload":{"ok":true}}}' >&3
echo done`)
	s := startStack(t, diskConfig(t, exe))
	r := do(t, "POST", s.inURL+"/v1/process", `{"n":1}`, "X-Svc-Label-customer", "acme")
	var body worker.ExecResponse
	if err := json.Unmarshal([]byte(r.body), &body); err != nil || r.status != 200 {
		t.Fatalf("ingress = %d %s", r.status, r.body)
	}
	taskID := body.Tasks[0].TaskID

	var results struct {
		Results []event.TaskRow `json:"results"`
	}
	wait.For(t, wait.Long, "the task row", func() (bool, string) {
		body := do(t, "GET", s.uiURL+"/api/v1/live/task-results?limit=10", "").body
		_ = json.Unmarshal([]byte(body), &results)
		return len(results.Results) == 1, body
	})
	row := results.Results[0]
	if row.TaskID != taskID || row.Source != "http" || row.Status != "ok" || row.Labels["customer"] != "acme" || row.Attempts != 1 {
		t.Errorf("task row = %+v", row)
	}

	var trace struct {
		TaskID string        `json:"task_id"`
		Events []event.Event `json:"events"`
	}
	wait.For(t, wait.Long, "the trace", func() (bool, string) {
		body := do(t, "GET", s.uiURL+"/api/v1/debug/trace?task_id="+taskID, "").body
		_ = json.Unmarshal([]byte(body), &trace)
		return len(trace.Events) >= 4, body
	})
	types := map[string]bool{}
	for _, e := range trace.Events {
		types[e.Type] = true
		if e.TaskID != taskID || e.Worker != "test" {
			t.Errorf("trace event of another task or worker: %+v", e)
		}
	}
	for _, want := range []string{"task_received", "executor_started", "executor_finished", "annotation"} {
		if !types[want] {
			t.Errorf("trace lacks %s: %v", want, types)
		}
	}

	var evs struct {
		Events []event.Event `json:"events"`
	}
	_ = json.Unmarshal([]byte(do(t, "GET", s.uiURL+"/api/v1/events?types=annotation&limit=5", "").body), &evs)
	if len(evs.Events) != 1 || evs.Events[0].Kind != "billing.check" || !strings.Contains(string(evs.Events[0].Payload), `"ok":true`) {
		t.Errorf("annotation events = %+v", evs.Events)
	}
	var byLabel struct {
		Tasks []event.TaskRow `json:"tasks"`
	}
	_ = json.Unmarshal([]byte(do(t, "GET", s.uiURL+"/api/v1/debug/trace-by-label?name=customer&value=acme", "").body), &byLabel)
	if len(byLabel.Tasks) != 1 || byLabel.Tasks[0].TaskID != taskID {
		t.Errorf("trace-by-label = %+v", byLabel.Tasks)
	}
	var counts recorder.Counts
	_ = json.Unmarshal([]byte(do(t, "GET", s.uiURL+"/api/v1/dashboard/counts", "").body), &counts)
	if counts.BySource["http"]["ok"] != 1 {
		t.Errorf("counts = %+v", counts)
	}
	for _, bad := range []string{"/api/v1/events?limit=0", "/api/v1/events?limit=1001", "/api/v1/events?limit=x", "/api/v1/debug/trace", "/api/v1/live/task-results?limit=-1"} {
		if r := do(t, "GET", s.uiURL+bad, ""); r.status != 400 {
			t.Errorf("GET %s = %d, want 400", bad, r.status)
		}
	}
}

func TestHistoryDownloadMergeAndLive(t *testing.T) {
	t.Parallel()
	cfg := diskConfig(t, "/bin/cat")
	s := startStack(t, cfg)
	do(t, "POST", s.inURL+"/v1/process", "one")

	// A sealed file of another worker in the shared history folder: a
	// second worker on the same folder, stopped (it seals at shutdown).
	hist := filepath.Join(cfg.Shared.Dir, "history", "default")
	ocfg := diskConfig(t, "/bin/cat")
	ocfg.Worker.Name, ocfg.Shared.Dir = "other", cfg.Shared.Dir
	startStack(t, ocfg).stop()
	var dbs struct {
		Databases []recorder.Database `json:"databases"`
	}
	wait.For(t, wait.Long, "the other worker's sealed file in databases", func() (bool, string) {
		body := do(t, "GET", s.uiURL+"/api/v1/debug/databases", "").body
		_ = json.Unmarshal([]byte(body), &dbs)
		for _, d := range dbs.Databases {
			if d.Worker == "other" && d.Kind == "sealed" {
				return true, ""
			}
		}
		return false, body
	})
	var sealed string
	for _, d := range dbs.Databases {
		if d.Worker == "other" && d.Kind == "sealed" {
			sealed = d.Path
		}
		if filepath.IsAbs(d.Path) {
			t.Errorf("absolute path in databases: %s", d.Path)
		}
	}
	r := do(t, "GET", s.uiURL+"/api/v1/debug/download?path="+sealed, "")
	if r.status != 200 || !strings.HasPrefix(r.body, "SQLite format 3") || !strings.Contains(r.header.Get("Content-Disposition"), "attachment") {
		t.Errorf("download %s = %d %q", sealed, r.status, r.body[:min(20, len(r.body))])
	}

	// The worker's own live file and anything unsafe are never served by path.
	live, _ := filepath.Glob(filepath.Join(cfg.Storage.Dir, "recorder", "*.db"))
	if len(live) != 1 {
		t.Fatalf("live files = %v", live)
	}
	if err := os.Symlink(filepath.Join(hist, filepath.Base(sealed)), filepath.Join(hist, "link.db")); err != nil {
		t.Fatal(err)
	}
	if r := do(t, "GET", s.uiURL+"/api/v1/debug/download", ""); r.status != 400 || !strings.Contains(r.body, "path is required") {
		t.Errorf("download without path = %d %s, want 400 saying path is required", r.status, r.body)
	}
	for _, p := range []string{
		"history/default/missing.db", "../storage/recorder/" + filepath.Base(live[0]), "history/default/../../storage/x.db",
		"history%2Fdefault%2F..%2F..%2Fetc%2Fpasswd", "%2e%2e/%2e%2e/etc/passwd", "/etc/passwd", "history\\default\\x.db",
		"history/default/link.db", "recorder/" + filepath.Base(live[0]), "history/default/" + filepath.Base(sealed) + ".meta.json",
	} {
		r := do(t, "GET", s.uiURL+"/api/v1/debug/download?path="+p, "")
		if r.status != 404 || !strings.Contains(r.body, "no downloadable database at") {
			t.Errorf("download %q = %d %s, want 404 naming the path", p, r.status, r.body)
		}
	}

	r = do(t, "POST", s.uiURL+"/api/v1/debug/merge", `{"paths":["`+sealed+`"]}`)
	var mr recorder.MergeResult
	if err := json.Unmarshal([]byte(r.body), &mr); err != nil || r.status != 200 || !strings.HasPrefix(mr.Path, "merged/merged-") {
		t.Fatalf("merge = %d %s", r.status, r.body)
	}
	st, err := os.Stat(filepath.Join(cfg.Shared.Dir, filepath.FromSlash(mr.Path)))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("merge result %v mode %v, want 0600", err, st)
	}
	for _, body := range []string{`{"paths":["history/default/x.db.gz"]}`, `{"paths":[]}`, `{"paths":["live/test"]}`, `{"paths":["../x.db"]}`} {
		if r := do(t, "POST", s.uiURL+"/api/v1/debug/merge", body); r.status != 400 {
			t.Errorf("merge %s = %d %s, want 400", body, r.status, r.body)
		}
	}

	r = do(t, "GET", s.uiURL+"/api/v1/debug/download-live", "")
	if r.status != 200 || !strings.HasPrefix(r.body, "SQLite format 3") {
		t.Errorf("download-live = %d", r.status)
	}
}

func TestHistoryMemoryOnlyAndMergeSwitch(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, "/bin/cat") // storage.dir ""
	cfg.UI.MergeEnabled = false
	s := startStack(t, cfg)
	if r := do(t, "GET", s.uiURL+"/api/v1/debug/download-live", ""); r.status != 404 || !strings.Contains(r.body, "memory-only") {
		t.Errorf("download-live in memory mode = %d %s", r.status, r.body)
	}
	if r := do(t, "POST", s.uiURL+"/api/v1/debug/merge", `{"paths":["history/default/a.db"]}`); r.status != 403 || !strings.Contains(r.body, "ui.merge_enabled is false") {
		t.Errorf("merge disabled = %d %s", r.status, r.body)
	}
	do(t, "POST", s.inURL+"/v1/process", "x")
	wait.For(t, wait.Long, "a task row in memory mode", func() (bool, string) {
		body := do(t, "GET", s.uiURL+"/api/v1/live/task-results", "").body
		return strings.Contains(body, `"status":"ok"`), body
	})
	// Spec 1.2 rule 13: a memory-only recorder means zeroed dashboard counts.
	if r := do(t, "GET", s.uiURL+"/api/v1/dashboard/counts", ""); !strings.Contains(r.body, `"total":0`) || !strings.Contains(r.body, `"memory_only":true`) {
		t.Errorf("memory-only counts = %s, want zeroed and flagged", r.body)
	}
}

// TestStreamsAreBounded: downloads and NDJSON windows are capped at once
// (503 past the cap) and a client that stops reading is cut off once a
// write makes no progress for the stream window, freeing its slot.
func TestStreamsAreBounded(t *testing.T) {
	t.Parallel()
	cfg := diskConfig(t, "/bin/cat")
	s := startStack(t, cfg)
	// The window must outlast opening every stream: a shorter one cuts the
	// first stalled download off before the last takes its slot on a
	// loaded machine (the full suite runs under -race beside every other
	// package).
	s.ui.streams.window = 10 * time.Second
	if testing.Short() {
		s.ui.streams.window = 3 * time.Second
	}
	dir := filepath.Join(cfg.Shared.Dir, "history", cfg.Worker.Cluster)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	const name = "other-1700000000000-1700000600000.db"
	big := make([]byte, 24<<20) // more than loopback socket buffers hold
	if err := os.WriteFile(filepath.Join(dir, name), big, 0o600); err != nil {
		t.Fatal(err)
	}
	url := s.uiURL + "/api/v1/debug/download?path=history/" + cfg.Worker.Cluster + "/" + name
	addr := strings.TrimPrefix(s.uiURL, "http://")
	var conns []net.Conn
	for range maxStreams {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		fmt.Fprintf(c, "GET /api/v1/debug/download?path=history/%s/%s HTTP/1.1\r\nHost: %s\r\n\r\n", cfg.Worker.Cluster, name, addr)
	}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	wait.For(t, wait.Long, "every stream slot taken", func() (bool, string) {
		n := len(s.ui.streams.slots)
		return n == maxStreams, fmt.Sprintf("%d of %d slots taken", n, maxStreams)
	})
	if r := do(t, "GET", url, ""); r.status != 503 || !strings.Contains(r.body, "too_many_streams") {
		t.Errorf("download past the cap = %d %s, want 503 too_many_streams", r.status, r.body[:min(len(r.body), 200)])
	}
	// Nobody reads: every stalled write hits the window and its slot frees.
	wait.For(t, wait.Long, "stalled downloads cut off", func() (bool, string) {
		n := len(s.ui.streams.slots)
		return n == 0, fmt.Sprintf("%d slots still taken", n)
	})
	if r := do(t, "GET", url, ""); r.status != 200 || len(r.body) != len(big) {
		t.Errorf("download after the stalled ones were cut off = %d, %d bytes, want 200 and %d bytes", r.status, len(r.body), len(big))
	}
}

// Tasks that succeed at their first attempt keep their lifecycle events
// folded into their task row (history.task_detail = "summary", the
// default): GET /api/v1/events no longer lists them, the trace still shows
// them, with the Kafka message's place and key for a Kafka task, and
// without the stdout tail; "full" keeps every event as a row. This runs the
// worker's real event payloads through the fold: if they drift from what the
// recorder rebuilds, the fold stops and the first check fails.
func TestHistorySummarizesSuccessfulTasks(t *testing.T) {
	t.Parallel()
	lifecycle := "/api/v1/events?types=task_received,executor_started,executor_finished&limit=1000"
	type traced struct {
		Events []event.Event `json:"events"`
	}
	trace := func(t *testing.T, s *stack, taskID string, n int) []event.Event {
		var tr traced
		wait.For(t, wait.Long, "the trace of "+taskID, func() (bool, string) {
			body := do(t, "GET", s.uiURL+"/api/v1/debug/trace?task_id="+taskID, "").body
			_ = json.Unmarshal([]byte(body), &tr)
			return len(tr.Events) >= n, body
		})
		return tr.Events
	}
	events := func(t *testing.T, s *stack, path string) []event.Event {
		var evs traced
		if err := json.Unmarshal([]byte(do(t, "GET", s.uiURL+path, "").body), &evs); err != nil {
			t.Fatal(err)
		}
		return evs.Events
	}
	for _, detail := range []string{"summary", "full"} {
		t.Run("http/"+detail, func(t *testing.T) {
			t.Parallel()
			cfg := diskConfig(t, script(t, `cat`))
			cfg.History.TaskDetail = detail
			s := startStack(t, cfg)
			r := do(t, "POST", s.inURL+"/v1/process", `hello`)
			var body worker.ExecResponse
			if err := json.Unmarshal([]byte(r.body), &body); err != nil || r.status != 200 {
				t.Fatalf("ingress = %d %s", r.status, r.body)
			}
			evs := trace(t, s, body.Tasks[0].TaskID, 3)
			var types []string
			for _, e := range evs {
				types = append(types, e.Type)
				if e.Type == "executor_finished" {
					hasTail := strings.Contains(string(e.Payload), "stdout_tail")
					if hasTail != (detail == "full") || !strings.Contains(string(e.Payload), `"status":"ok","exit_code":0`) {
						t.Errorf("executor_finished = %s (task_detail %s)", e.Payload, detail)
					}
				}
			}
			if strings.Join(types, ",") != "task_received,executor_started,executor_finished" {
				t.Errorf("trace types = %v", types)
			}
			wait.For(t, wait.Long, "the task row stored", func() (bool, string) {
				body := do(t, "GET", s.uiURL+"/api/v1/dashboard/counts", "").body
				return strings.Contains(body, `"ok":1`), body
			})
			listed := events(t, s, lifecycle)
			if want := map[string]int{"summary": 0, "full": 3}[detail]; len(listed) != want {
				t.Errorf("events API lists %d lifecycle events, want %d (task_detail %s)", len(listed), want, detail)
			}
			// Identity says whether successful tasks may be sampled.
			var id struct {
				Sampling int `json:"task_sampling_above_per_second"`
			}
			json.Unmarshal([]byte(do(t, "GET", s.uiURL+"/api/v1/identity", "").body), &id)
			if want := map[string]int{"summary": cfg.History.SampleAbovePerSecond, "full": 0}[detail]; id.Sampling != want || cfg.History.SampleAbovePerSecond == 0 {
				t.Errorf("identity task_sampling_above_per_second = %d, want %d (task_detail %s)", id.Sampling, want, detail)
			}
		})
	}
	t.Run("kafka/summary", func(t *testing.T) {
		t.Parallel()
		s, _ := kafkaStack(t, func(cfg *config.Config) {
			root := t.TempDir()
			cfg.Storage.Dir = filepath.Join(root, "storage")
		})
		var counts recorder.Counts
		wait.For(t, wait.Long, "30 Kafka tasks stored", func() (bool, string) {
			body := do(t, "GET", s.uiURL+"/api/v1/dashboard/counts", "").body
			_ = json.Unmarshal([]byte(body), &counts)
			return counts.BySource["kafka"]["ok"] == 30, body
		})
		var tasks struct {
			Results []event.TaskRow `json:"results"`
		}
		_ = json.Unmarshal([]byte(do(t, "GET", s.uiURL+"/api/v1/live/task-results?limit=1", "").body), &tasks)
		if len(tasks.Results) != 1 {
			t.Fatal("no task row")
		}
		row := tasks.Results[0]
		if listed := events(t, s, lifecycle); len(listed) != 0 {
			t.Errorf("events API lists %d lifecycle events of summarized Kafka tasks, want 0: %+v", len(listed), listed[0])
		}
		evs := trace(t, s, row.TaskID, 4)
		want := fmt.Sprintf(`{"source":"kafka","alias":"source","partition":%d,"offset":%d,"key":"k","key_encoding":"utf-8","input_size_bytes":7}`, row.Partition, row.Offset)
		if evs[0].Type != "task_received" || string(evs[0].Payload) != want {
			t.Errorf("first trace event = %s %s, want task_received %s", evs[0].Type, evs[0].Payload, want)
		}
	})
}
