package cache

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"svc/worker"
	"svc/worker/config"
	"svc/worker/model"
	"svc/worker/workertest"
)

// app builds the worker `svc run` builds for an HTTP-only config running
// script through a real executor pool, with the handler cache on (kept in
// dir, or in memory when dir is ""), handler.cache_keys keys and tune
// applied to the cache's config.
func app(t *testing.T, dir, script string, keys []string, tune ...func(*config.Cache)) Built {
	t.Helper()
	cfg := config.Default()
	cfg.Worker.Name = "w1"
	cfg.UI.Enabled, cfg.Metrics.Enabled, cfg.RuntimeHealth.Enabled = false, false, false
	cfg.Sources.HTTP.Enabled = true
	cfg.Sources.HTTP.Host, cfg.Sources.HTTP.Port = "127.0.0.1", 0
	cfg.Storage.Dir = dir
	cfg.Executor.BinaryPath = workertest.Script(t, script)
	cfg.Executor.PoolSize = 2
	cfg.Executor.Timeout = config.Duration(10 * time.Second)
	cfg.Handler.MaxAttempts = 1
	cfg.Cache.Enabled = true
	cfg.Handler.CacheKeys = keys
	for _, f := range tune {
		f(&cfg.Cache)
	}
	cfg.Resolve()
	if problems := cfg.Validate(); len(problems) > 0 {
		t.Fatalf("test config invalid: %v", problems)
	}
	return BuildWorker(t, &cfg)
}

func runOne(t *testing.T, a *worker.App, source, body string) model.TaskResult {
	t.Helper()
	tasks := []model.Task{{ID: "t1", Msg: &model.Message{Source: source, Value: []byte(body)}, Input: []byte(body)}}
	return a.RunTasks(t.Context(), source, tasks)[0]
}

func annotation(res model.TaskResult, kind string) map[string]any {
	for _, a := range res.Annotations {
		if a.Kind == kind {
			return a.Fields()
		}
	}
	return nil
}

// An executor sees the keys of handler.cache_keys in its environment and
// its fd 3 writes land in the store.
func TestExecutorReadsAndWritesTheCache(t *testing.T) {
	t.Parallel()
	b := app(t, t.TempDir(), `printf '%s|%s|%s|%s|%s' "$SVC_CACHE_FX_EURUSD" "$SVC_CACHE_FX_EURUSD_ENCODING" "$SVC_CACHE_BIN" "$SVC_CACHE_BIN_ENCODING" "${SVC_CACHE_MISSING-unset}"
echo '{"cache":{"key":"seen","value":"yes","scope":"global"}}' >&3
echo '{"cache":{"key":"fx:EURUSD","value":"1.09","scope":"cluster"}}' >&3`,
		[]string{"fx:EURUSD", "bin", "missing"})
	s, a := b.Store, b.App
	put(t, s, ScopeCluster, "fx:EURUSD", "1.08")
	if err := s.Put(t.Context(), ScopeLocal, "bin", []byte{0, 1}); err != nil {
		t.Fatal(err)
	}
	res := runOne(t, a, model.SourceHTTP, "x")
	if string(res.Output) != "1.08|utf-8|AAE=|base64|unset" {
		t.Errorf("executor saw %q", res.Output)
	}
	if r, ok := get(t, s, ScopeGlobal, "seen"); !ok || string(r.Value) != "yes" || r.Origin != "w1" {
		t.Errorf("fd 3 write = %+v %v", r, ok)
	}
	if r, _ := get(t, s, ScopeCluster, "fx:EURUSD"); string(r.Value) != "1.09" {
		t.Errorf("fd 3 rewrite = %q, want 1.09", r.Value)
	}
	// The next run reads the value the previous one wrote.
	if res := runOne(t, a, model.SourceHTTP, "y"); !strings.HasPrefix(string(res.Output), "1.09|") {
		t.Errorf("second run saw %q, want the rewritten 1.09", res.Output)
	}
	if res.Task.Env != nil {
		t.Errorf("task env after the run = %v, want the handler's own (nil)", res.Task.Env)
	}
	if got := workertest.Metric(t, b.Registry, "svc_cache_reads_total", "result", "hit"); got != 4 {
		t.Errorf("hits = %v, want 2 per run", got)
	}
}

// Writes over a bound are refused, counted and annotated; the task's
// status is untouched.
func TestRefusedWritesAreAnnotatedNotFatal(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("k", MaxKeyBytes+1)
	b := app(t, "", `echo '{"cache":{"key":"ok","value":"1"}}' >&3
echo '{"cache":{"key":"`+long+`","value":"1"}}' >&3
echo '{"cache":{"key":"second","value":"1"}}' >&3
echo done`, nil, func(c *config.Cache) { c.MaxRows = 1 })
	a := b.App
	res := runOne(t, a, model.SourceHTTP, "x")
	if res.Status != model.StatusOK {
		t.Fatalf("status = %s (%v), want ok", res.Status, res.Err)
	}
	p := annotation(res, RefusedKind)
	js, _ := json.Marshal(p)
	if p == nil || p["refused"] != 2.0 || p["refused_key"] != 1.0 || p["refused_full"] != 1.0 {
		t.Fatalf("annotation = %s, want 2 refused: 1 key, 1 full", js)
	}
	if ks, _ := p["keys"].([]any); len(ks) != 2 || len(ks[0].(string)) > 70 || ks[1] != "second" {
		t.Errorf("annotated keys = %q, want both, the long one cut", ks)
	}
	if r, ok := get(t, b.Store, ScopeLocal, "ok"); !ok || string(r.Value) != "1" {
		t.Error("the write within bounds was not stored")
	}
}

func TestProbeWritesAreNotStored(t *testing.T) {
	t.Parallel()
	b := app(t, "", `echo '{"cache":{"key":"probe","value":"1"}}' >&3`, nil)
	res := runOne(t, b.App, model.SourceProbe, "x")
	if p := annotation(res, ProbeSkippedKind); p == nil || p["writes"] != 1.0 {
		t.Errorf("annotations = %+v, want %s with writes 1", res.Annotations, ProbeSkippedKind)
	}
	if _, ok := get(t, b.Store, ScopeLocal, "probe"); ok {
		t.Error("a probe's write was stored")
	}
}

func TestEnvBudgetLeavesLaterKeysUnset(t *testing.T) {
	t.Parallel()
	s := open(t, "", "w1", func(c *Config) { c.MaxBytes = 64 << 20 })
	var ks []string
	for i := range 16 {
		k := string(rune('a' + i))
		ks = append(ks, k)
		if err := s.Put(t.Context(), ScopeLocal, k, []byte(strings.Repeat("\xff", MaxValueBytes))); err != nil {
			t.Fatal(err)
		}
	}
	task := &model.Task{Env: map[string]string{"OWN": "1"}}
	undo := NewTasks(s.Store, ks).Prepare(task)
	total, set := 0, 0
	for k, v := range task.Env {
		total += len(k) + len(v) + 2
		if strings.HasPrefix(k, "SVC_CACHE_") && !strings.HasSuffix(k, "_ENCODING") {
			set++
		}
	}
	if total > EnvBudget+100 || set == 0 || set == 16 {
		t.Errorf("env of %d bytes with %d of 16 keys, want at most %d bytes and some keys left out", total, set, EnvBudget)
	}
	if got := workertest.Metric(t, s.reg, "svc_cache_reads_total", "result", "over_budget"); got != float64(16-set) {
		t.Errorf("over_budget = %v, want %d", got, 16-set)
	}
	undo()
	if len(task.Env) != 1 || task.Env["OWN"] != "1" {
		t.Errorf("env after undo = %v, want the task's own", task.Env)
	}
}
