package executor

import (
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"svc/worker/model"
	"svc/worker/workertest"
)

// The example executors of docs/executor.md run as documented.
func TestExampleExecutors(t *testing.T) {
	t.Run("go", func(t *testing.T) {
		t.Parallel()
		goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
		bin := filepath.Join(t.TempDir(), "echo-go")
		if out, err := exec.Command(goBin, "build", "-o", bin, "../../testdata/executors/echo-go").CombinedOutput(); err != nil {
			t.Fatalf("build echo-go: %v\n%s", err, out)
		}
		opts := helperOptions(t, ModePersistent)
		opts.BinaryPath, opts.Args = bin, nil
		p := newPool(t, opts)
		res := p.Run(t.Context(), task("bytes \x00\xff\n kept"))
		if res.Status != model.StatusOK || res.Output == nil || string(res.Output) != "bytes \x00\xff\n kept" {
			t.Errorf("echo-go Run = %s %q (%v), want the payload back", res.Status, res.Output, res.Err)
		}
		want := []workertest.Ann{{Kind: "echo.size", Payload: map[string]any{"bytes": 14.0, "attempt": 1.0}}}
		if !reflect.DeepEqual(anns(res.Annotations), want) {
			t.Errorf("echo-go annotations = %+v, want %+v", res.Annotations, want)
		}
		res = p.Run(t.Context(), task("fail please"))
		if res.Status != model.StatusFailed || !strings.Contains(res.Err.Error(), "the message asked to fail") ||
			string(res.Stderr) != "task t-1 asked to fail\n" {
			t.Errorf("echo-go Run(fail) = %s (%v), stderr %q; want failed with its reason and stderr", res.Status, res.Err, res.Stderr)
		}
		wantEchoes(t, p)
	})
	t.Run("python", func(t *testing.T) {
		t.Parallel()
		if _, err := exec.LookPath("python3"); err != nil {
			t.Skip("python3 not installed")
		}
		bin, _ := filepath.Abs("../../testdata/executors/echo.py")
		opts := helperOptions(t, ModePersistent)
		opts.BinaryPath, opts.Args, opts.MaxAttempts = bin, nil, 2
		p := newPool(t, opts)
		res := p.Run(t.Context(), task("hello"))
		if res.Status != model.StatusOK || string(res.Output) != "HELLO" || res.Labels["handled_by"] != "echo.py" {
			t.Errorf("echo.py Run = %s %q labels %v (%v), want HELLO with its label", res.Status, res.Output, res.Labels, res.Err)
		}
		res = p.Run(t.Context(), task("busy"))
		if res.Status != model.StatusFailed || res.Attempts != 2 || string(res.Stderr) != "task t-1: dependency busy\n" {
			t.Errorf("echo.py Run(busy) = %s after %d attempts, stderr %q (%v); want failed after 2 retries", res.Status, res.Attempts, res.Stderr, res.Err)
		}
		wantEchoes(t, p)
	})
}

// wantEchoes fails t unless an idle child of p answered a task and no
// child broke the protocol (a result without its task's task_id and
// attempt is a violation).
func wantEchoes(t *testing.T, p *Pool) {
	t.Helper()
	b := p.backend.(*persistent)
	b.mu.Lock()
	defer b.mu.Unlock()
	answered := 0
	for _, c := range b.idle {
		if c.answered > 0 {
			answered++
		}
	}
	if answered == 0 {
		t.Errorf("no idle child that answered a task to check")
	}
	for _, k := range violationKinds {
		if n := metricValue(b.metrics.violations.WithLabelValues(k)); n != 0 {
			t.Errorf("violations{kind=%s} = %v, want 0", k, n)
		}
	}
}
