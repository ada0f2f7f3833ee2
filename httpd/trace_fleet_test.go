package httpd

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"svc/worker"
	"svc/worker/config"
	"svc/worker/workertest"
	"svc/worker/workertest/wait"
)

// traceAnswer is what the tests read of a trace.
type traceAnswer struct {
	TaskID string `json:"task_id"`
	Scope  string `json:"scope"`
	Events []struct {
		ID     int64  `json:"id"`
		TSms   int64  `json:"ts_ms"`
		Type   string `json:"type"`
		Kind   string `json:"kind"`
		TaskID string `json:"task_id"`
		Worker string `json:"worker"`
	} `json:"events"`
	Sources []string       `json:"sources"`
	Missing []TraceMissing `json:"missing"`
}

// A trace on worker A finds the events of a task that worker B ran and
// has not sealed yet, by asking B for its live file (scope=local), and
// says which workers answered: B among the sources, a worker whose card
// says running but which does not answer (killed) among the missing,
// without failing the trace. A worker asked with scope=local answers
// from its own live file alone and asks nobody: a peer that counts the
// requests it gets hears exactly one per trace (from A), none for a
// scope=local trace, though both workers trust it.
func TestTraceFindsAnotherWorkersUnsealedTask(t *testing.T) {
	t.Parallel()
	exe := script(t, `cat >/dev/null
echo '{"annotation":{"kind":"billing.check","payload":{"ok":true}}}' >&3
echo done`)
	root := t.TempDir()
	shared := filepath.Join(root, "shared")
	token := "fleet-secret-0123456789"

	// counter is a trusted "worker" that answers every trace with nothing
	// and counts what it is asked.
	var mu sync.Mutex
	var heard []string
	counter := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		heard = append(heard, r.URL.RequestURI()+" auth="+r.Header.Get("Authorization"))
		mu.Unlock()
		_, _ = w.Write([]byte(`{"task_id":"x","scope":"local","events":[],"tasks":[],"sources":["counter"],"missing":[]}`))
	}))
	t.Cleanup(counter.Close)
	heardSoFar := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(heard)
	}
	dead := fmt.Sprintf("http://127.0.0.1:%d", workertest.FreePort(t)) // nothing listens there
	writeCard(t, shared, "counter", counter.URL)
	writeCard(t, shared, "crashed", dead)

	portA, portB := workertest.FreePort(t), workertest.FreePort(t)
	urlA, urlB := fmt.Sprintf("http://127.0.0.1:%d", portA), fmt.Sprintf("http://127.0.0.1:%d", portB)
	cfgOf := func(name string, port int) *config.Config {
		cfg := testConfig(t, exe)
		cfg.Worker.Name = name
		cfg.UI.Port = port
		cfg.UI.AuthToken = token
		cfg.Storage.Dir = filepath.Join(root, name)
		cfg.Shared.Dir = shared
		cfg.Fleet.TrustedURLs = []string{urlA, urlB, counter.URL, dead}
		cfg.Fleet.Registry.Heartbeat = config.Duration(200 * time.Millisecond)
		return cfg
	}
	a := startStack(t, cfgOf("a", portA))
	b := startStack(t, cfgOf("b", portB))
	auth := []string{"Authorization", "Bearer " + token}
	get := func(s *stack, path string, v any) {
		t.Helper()
		r := do(t, "GET", s.uiURL+path, "", auth...)
		if r.status != 200 || json.Unmarshal([]byte(r.body), v) != nil {
			t.Fatalf("GET %s = %d %s", path, r.status, r.body)
		}
	}
	wait.For(t, wait.Long, "a listing b running", func() (bool, string) {
		var l WorkersList
		get(a, "/api/v1/fleet/workers", &l)
		for _, w := range l.Workers {
			if w.Name == "b" {
				return w.State == "running" && w.Trusted, fmt.Sprintf("%+v", w)
			}
		}
		return false, fmt.Sprintf("%+v", l.Workers)
	})

	r := do(t, "POST", b.inURL+"/v1/process", `{"n":1}`, "X-Svc-Label-customer", "acme")
	var ran worker.ExecResponse
	if err := json.Unmarshal([]byte(r.body), &ran); err != nil || r.status != 200 {
		t.Fatalf("b's ingress = %d %s", r.status, r.body)
	}
	taskID := ran.Tasks[0].TaskID
	var own traceAnswer
	wait.For(t, wait.Long, "b's live file holding its task's events", func() (bool, string) {
		get(b, "/api/v1/debug/trace?scope=local&task_id="+taskID, &own)
		return len(own.Events) >= 4, fmt.Sprintf("%+v", own)
	})
	if m, _ := filepath.Glob(filepath.Join(shared, "history", "default", "b-*.db")); len(m) != 0 {
		t.Fatalf("b sealed %v already: the test needs its task unsealed", m)
	}
	before := len(heardSoFar())

	var tr traceAnswer
	get(a, "/api/v1/debug/trace?task_id="+taskID, &tr)
	var types []string
	for i, e := range tr.Events {
		types = append(types, e.Type)
		if e.Worker != "b" || e.TaskID != taskID {
			t.Errorf("event %d of another worker or task: %+v", i, e)
		}
		if i > 0 && e.TSms < tr.Events[i-1].TSms {
			t.Errorf("events out of time order at %d: %+v", i, tr.Events)
		}
	}
	slices.Sort(types)
	if want := []string{"annotation", "executor_finished", "executor_started", "task_received"}; !slices.Equal(types, want) {
		t.Errorf("a's trace of b's unsealed task has %v, want each of %v once", types, want)
	}
	if fmt.Sprint(tr.Events) != fmt.Sprint(own.Events) {
		t.Errorf("a's trace of b's task:\n%+v\nb's own:\n%+v", tr.Events, own.Events)
	}
	if tr.Scope != "cluster" || !slices.Equal(tr.Sources, []string{"a", "b", "counter"}) {
		t.Errorf("scope %q sources %v, want cluster and [a b counter]", tr.Scope, tr.Sources)
	}
	if len(tr.Missing) != 1 || tr.Missing[0].Worker != "crashed" || tr.Missing[0].URL != dead || !strings.Contains(tr.Missing[0].Reason, "did not answer") {
		t.Errorf("missing = %+v, want the crashed worker that did not answer", tr.Missing)
	}
	asked := heardSoFar()[before:]
	if len(asked) != 1 || !strings.Contains(asked[0], "scope=local") || !strings.Contains(asked[0], "task_id="+taskID) || !strings.HasSuffix(asked[0], "auth=Bearer "+token) {
		t.Errorf("the counting peer heard %q, want one scope=local trace with the token (b asked nobody)", asked)
	}

	// A trace of scope local asks nobody and finds only its own events.
	before = len(heardSoFar())
	var local traceAnswer
	get(a, "/api/v1/debug/trace?scope=local&task_id="+taskID, &local)
	if len(local.Events) != 0 || !slices.Equal(local.Sources, []string{"a"}) || len(local.Missing) != 0 || local.Scope != "local" {
		t.Errorf("a's scope=local trace of b's task = %+v, want nothing from a alone", local)
	}
	if n := len(heardSoFar()) - before; n != 0 {
		t.Errorf("a scope=local trace asked the counting peer %d times", n)
	}

	// Find by label reaches b's live file the same way.
	var byLabel struct {
		Tasks []struct {
			TaskID string `json:"task_id"`
			Worker string `json:"worker"`
		} `json:"tasks"`
		Sources []string       `json:"sources"`
		Missing []TraceMissing `json:"missing"`
	}
	get(a, "/api/v1/debug/trace-by-label?name=customer&value=acme", &byLabel)
	if len(byLabel.Tasks) != 1 || byLabel.Tasks[0].TaskID != taskID || byLabel.Tasks[0].Worker != "b" ||
		!slices.Equal(byLabel.Sources, []string{"a", "b", "counter"}) || len(byLabel.Missing) != 1 {
		t.Errorf("a's trace-by-label = %+v, want b's task, sources a, b, counter and crashed missing", byLabel)
	}

	if r := do(t, "GET", a.uiURL+"/api/v1/debug/trace?scope=fleet&task_id=x", "", auth...); r.status != 400 {
		t.Errorf("scope=fleet = %d %s, want 400", r.status, r.body)
	}
}
