package demo

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"svc/httpd/root"
	"svc/worker/config"
	"svc/worker/executor"
	"svc/worker/model"
)

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "exec-demo" {
		os.Exit(Execute(os.Stdin, os.Stdout, os.Stderr, os.NewFile(3, "events")))
	}
	os.Exit(m.Run())
}

// The demo executor behaves the same in both executor modes.
func TestDemoExecutorModes(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{executor.ModeSpawn, executor.ModePersistent} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			// The worker `svc run` builds, HTTP only, running the demo
			// executor through its pool.
			cfg := config.Default()
			cfg.UI.Enabled, cfg.Metrics.Enabled, cfg.RuntimeHealth.Enabled = false, false, false
			cfg.Sources.HTTP.Enabled, cfg.Sources.HTTP.Host, cfg.Sources.HTTP.Port = true, "127.0.0.1", 0
			cfg.Executor.Mode, cfg.Executor.BinaryPath, cfg.Executor.Args = mode, self, []string{"exec-demo"}
			fix := FixFile(t.TempDir())
			cfg.Executor.Env = map[string]string{FixEnv: fix}
			cfg.Executor.PoolSize, cfg.Executor.Timeout, cfg.Executor.ReadyTimeout = 1, config.Duration(20*time.Second), config.Duration(20*time.Second)
			cfg.Handler.MaxAttempts, cfg.Handler.RetryBackoff = 2, config.Duration(time.Millisecond)
			cfg.Resolve()
			if problems := cfg.Validate(); len(problems) > 0 {
				t.Fatalf("config invalid: %v", problems)
			}
			w, err := root.New(t.Context(), &cfg, root.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			p := w.Pool
			task := func(in string) *model.Task {
				return &model.Task{ID: "t1", Input: []byte(in), Msg: &model.Message{Source: model.SourceHTTP}}
			}
			res := p.Run(t.Context(), task("hello world"))
			var out map[string]any
			if res.Status != model.StatusOK || json.Unmarshal(res.Output, &out) != nil || out["upper"] != "HELLO WORLD" || out["task_id"] != "t1" {
				t.Errorf("Run(hello) = %s %q (%v), want the JSON summary", res.Status, res.Output, res.Err)
			}
			if len(res.Annotations) != 1 || res.Annotations[0].Kind != "demo.summary" {
				t.Errorf("Run(hello) annotations = %+v, want one demo.summary", res.Annotations)
			}
			res = p.Run(t.Context(), task(`{"note":"tempfail"}`))
			if res.Status != model.StatusOK || res.Attempts != 2 {
				t.Errorf("Run(tempfail) = %s after %d attempts (%v), want ok on the second attempt (a retry that works)", res.Status, res.Attempts, res.Err)
			}
			res = p.Run(t.Context(), task("please fail"))
			if res.Status != model.StatusFailed || res.Attempts != 2 || !strings.Contains(string(res.Stderr), "asked to fail") {
				t.Errorf("Run(fail) = %s after %d attempts, stderr %q; want failed after 2 with its reason", res.Status, res.Attempts, res.Stderr)
			}
			// The failure class a fix turns into success: an order in
			// FixCurrency fails until the fix file exists, then succeeds
			// on the same executor (a persistent one is not restarted).
			gbp := `{"order":6,"customer":"wayne","amount":12,"currency":"GBP"}`
			res = p.Run(t.Context(), task(gbp))
			wantErr := map[string]string{executor.ModeSpawn: "exited with code 3", executor.ModePersistent: "no exchange rate for GBP"}[mode]
			if res.Status != model.StatusFailed || res.Err == nil || !strings.Contains(res.Err.Error(), wantErr) || !strings.Contains(string(res.Stderr), fix) {
				t.Errorf("Run(GBP) before the fix = %s (%v), stderr %q; want failed (%s) naming the fix file %s", res.Status, res.Err, res.Stderr, wantErr, fix)
			}
			if err := os.WriteFile(fix, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			res = p.Run(t.Context(), task(gbp))
			if res.Status != model.StatusOK || res.Attempts != 1 {
				t.Errorf("Run(GBP) after the fix = %s after %d attempts (%v), want ok at once", res.Status, res.Attempts, res.Err)
			}
		})
	}
}

// The demo executor in mode persistent names the task each result
// answers (task_id and attempt), as docs/executor.md recommends.
func TestDemoPersistentNamesItsTask(t *testing.T) {
	t.Setenv("SVC_EXECUTOR_MODE", "persistent")
	var in, out bytes.Buffer
	for _, h := range []string{`{"type":"task","task_id":"w1-7","attempt":2,"source":"http"}`, `{"type":"task","task_id":"w1-8","attempt":1,"source":"http"}`} {
		binary.Write(&in, binary.BigEndian, uint32(len(h)+1+len("hi")))
		in.WriteString(h + "\nhi")
	}
	if code := Execute(&in, &out, io.Discard, nil); code != 0 {
		t.Fatalf("Execute = %d, want 0", code)
	}
	var got []string
	for out.Len() > 0 {
		var n uint32
		binary.Read(&out, binary.BigEndian, &n)
		header, _, _ := bytes.Cut(out.Next(int(n)), []byte{'\n'})
		var h struct {
			Type    string `json:"type"`
			TaskID  string `json:"task_id"`
			Attempt int    `json:"attempt"`
		}
		if err := json.Unmarshal(header, &h); err != nil {
			t.Fatalf("frame header %q: %v", header, err)
		}
		got = append(got, fmt.Sprintf("%s %s %d", h.Type, h.TaskID, h.Attempt))
	}
	if want := []string{"ready  0", "result w1-7 2", "result w1-8 1"}; !slices.Equal(got, want) {
		t.Errorf("frames = %q, want %q", got, want)
	}
}
