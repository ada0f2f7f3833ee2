package executor

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"svc/worker"
)

func execNewPool(t *testing.T, opts Options) *Pool {
	t.Helper()
	p, err := NewPool(opts)
	if err != nil {
		t.Fatalf("NewPool: %v", err)
	}
	return p
}

// execCountLines is the number of lines in path (0 when missing).
func execCountLines(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return strings.Count(string(b), "\n")
}

func TestExecutorOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Options)
		key  string
	}{
		{"no binary", func(o *Options) { o.BinaryPath = "" }, "executor.binary_path"},
		{"negative pool", func(o *Options) { o.PoolSize = -1 }, "executor.pool_size"},
		{"negative timeout", func(o *Options) { o.Timeout = -time.Second }, "executor.timeout"},
		{"negative output cap", func(o *Options) { o.MaxOutputBytes = -1 }, "executor.max_output_bytes"},
		{"negative attempts", func(o *Options) { o.MaxAttempts = -1 }, "handler.max_attempts"},
		{"negative backoff", func(o *Options) { o.RetryBackoff = -time.Second }, "handler.retry_backoff"},
		{"bad env name", func(o *Options) { o.Env = map[string]string{"A=B": "c"} }, "executor.env"},
		{"NUL in env", func(o *Options) { o.Env = map[string]string{"A": "b\x00"} }, "executor.env"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := Options{BinaryPath: "cat"}
			tc.edit(&opts)
			if _, err := NewPool(opts); err == nil || !strings.Contains(err.Error(), tc.key) {
				t.Errorf("NewPool() error = %v, want one naming %s", err, tc.key)
			}
		})
	}
	p := execNewPool(t, Options{BinaryPath: "cat"})
	o := p.opts
	if p.Size() != runtime.NumCPU() || o.Timeout != 30*time.Second || o.MaxOutputBytes != 8<<20 ||
		o.MaxAttempts != 3 || o.StderrTail != 8<<10 || o.RetryBackoff != 0 || p.Busy() != 0 || p.Waiting() != 0 {
		t.Errorf("NewPool(defaults) = size %d, %+v; want the documented defaults", p.Size(), o)
	}
}

func TestPoolBackoff(t *testing.T) {
	p := execNewPool(t, Options{BinaryPath: "cat", RetryBackoff: 100 * time.Millisecond})
	for _, tc := range []struct {
		retry int
		full  time.Duration
	}{{1, 100 * time.Millisecond}, {2, 200 * time.Millisecond}, {5, 1600 * time.Millisecond}, {8, 10 * time.Second}, {80, 10 * time.Second}} {
		for range 50 {
			if d := p.backoff(tc.retry); d < tc.full/2 || d >= tc.full {
				t.Fatalf("backoff(%d) = %s, want in [%s, %s)", tc.retry, d, tc.full/2, tc.full)
			}
		}
	}
	p.opts.RetryBackoff = 0
	if d := p.backoff(3); d != 0 {
		t.Errorf("backoff(3) with no retry_backoff = %s, want 0", d)
	}
}

func TestPoolTempFailThenSuccess(t *testing.T) {
	counter := filepath.Join(t.TempDir(), "count")
	opts := execTestOptions(execScript(t, `
n=$(cat "$COUNTER" 2>/dev/null || echo 0); n=$((n+1)); echo $n > "$COUNTER"
echo "{\"annotation\":{\"kind\":\"attempt\",\"payload\":{\"n\":$n}}}" >&3
echo "{\"labels\":{\"attempt\":\"$n\",\"region\":\"from-fd3\"}}" >&3
echo "attempt $n" >&2
[ $n -le 2 ] && exit 75
echo "{\"cache\":{\"key\":\"seen\",\"value\":\"$n\",\"scope\":\"cluster\"}}" >&3
echo done`))
	opts.Env = map[string]string{"COUNTER": counter}
	opts.MaxAttempts = 5
	var mu sync.Mutex
	var events []string
	opts.OnAttempt = func(task *worker.Task, attempt int, res *worker.AttemptResult) {
		mu.Lock()
		defer mu.Unlock()
		if res == nil {
			events = append(events, "start "+strconv.Itoa(attempt))
		} else {
			events = append(events, "end "+strconv.Itoa(attempt)+" "+res.Status)
		}
	}
	task := execTask("in")
	task.Labels = map[string]string{"tenant": "acme", "region": "from-task"}
	res := execNewPool(t, opts).Run(t.Context(), task)
	if res.Status != worker.StatusOK || res.Attempts != 3 || string(res.Output) != "done\n" || res.Err != nil {
		t.Fatalf("Run = %s after %d attempts, %q, %v; want ok after 3, %q", res.Status, res.Attempts, res.Output, res.Err, "done\n")
	}
	if res.Task != task || string(res.Stderr) != "attempt 3\n" || res.ExitCode != 0 {
		t.Errorf("Run = task %p, stderr %q, exit %d; want %p, the last attempt's stderr, 0", res.Task, res.Stderr, res.ExitCode, task)
	}
	wantAnn := []worker.Annotation{{Kind: "attempt", Payload: map[string]any{"n": 3.0}}}
	if !reflect.DeepEqual(res.Annotations, wantAnn) {
		t.Errorf("Run annotations = %+v, want the last attempt's %+v", res.Annotations, wantAnn)
	}
	wantLabels := map[string]string{"tenant": "acme", "region": "from-fd3", "attempt": "3"}
	if !reflect.DeepEqual(res.Labels, wantLabels) {
		t.Errorf("Run labels = %v, want %v", res.Labels, wantLabels)
	}
	if want := []worker.CacheWrite{{Key: "seen", Value: "3", Scope: "cluster"}}; !reflect.DeepEqual(res.CacheWrites, want) {
		t.Errorf("Run cache writes = %+v, want %+v", res.CacheWrites, want)
	}
	if len(task.Labels) != 2 {
		t.Errorf("Run changed the task's labels to %v", task.Labels)
	}
	want := []string{"start 1", "end 1 tempfail", "start 2", "end 2 tempfail", "start 3", "end 3 ok"}
	if !reflect.DeepEqual(events, want) {
		t.Errorf("OnAttempt calls = %v, want %v", events, want)
	}
}

func TestPoolRetriesUntilMaxAttempts(t *testing.T) {
	for _, tc := range []struct {
		name, script string
		status       string
		exit         int
		errText      string
	}{
		{"tempfail", "exit 75", worker.StatusFailed, 75, "executor asked to retry (exit 75) 3 times"},
		{"failed", "exit 3", worker.StatusFailed, 3, "executor exited with code 3"},
		{"timeout", "sleep 30", worker.StatusTimeout, -1, "executor timed out after 200ms (executor.timeout)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runs := filepath.Join(t.TempDir(), "runs")
			opts := execTestOptions(execScript(t, `echo run >> "$RUNS"; `+tc.script))
			opts.Env = map[string]string{"RUNS": runs}
			opts.MaxAttempts, opts.Timeout = 3, 200*time.Millisecond
			res := execNewPool(t, opts).Run(t.Context(), execTask("in"))
			if res.Status != tc.status || res.Attempts != 3 || res.ExitCode != tc.exit {
				t.Errorf("Run = %s after %d attempts, exit %d; want %s after 3, exit %d", res.Status, res.Attempts, res.ExitCode, tc.status, tc.exit)
			}
			if res.Err == nil || res.Err.Error() != tc.errText {
				t.Errorf("Run error = %v, want %q", res.Err, tc.errText)
			}
			if n := execCountLines(t, runs); n != 3 {
				t.Errorf("executor ran %d times, want 3", n)
			}
		})
	}
}
func TestPoolBadBinary(t *testing.T) {
	dir := t.TempDir()
	notExec := filepath.Join(dir, "plain.sh")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\necho hi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, bin, want string }{
		{"missing", filepath.Join(dir, "nope"), "no such file or directory"},
		{"not executable", notExec, "permission denied"},
		{"directory", dir, "permission denied"},
		{"not in PATH", "svc-no-such-executor", "not found in $PATH"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := execTestOptions(tc.bin)
			opts.MaxAttempts = 2
			res := execNewPool(t, opts).Run(t.Context(), execTask("in"))
			if res.Status != worker.StatusFailed || res.Err == nil || res.Attempts != 2 || res.ExitCode != -1 {
				t.Fatalf("Run(%s) = %s after %d attempts, exit %d, %v; want failed after 2, exit -1", tc.bin, res.Status, res.Attempts, res.ExitCode, res.Err)
			}
			msg := res.Err.Error()
			if !strings.Contains(msg, "executor.binary_path") || !strings.Contains(msg, tc.want) {
				t.Errorf("Run(%s) error = %q, want it to name executor.binary_path and say %q", tc.bin, msg, tc.want)
			}
		})
	}
}

func TestPoolRecoversOnceBinaryIsFixed(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "executor.sh")
	p := execNewPool(t, execTestOptions(bin))
	steps := []struct {
		name   string
		fix    func() error
		status string
	}{
		{"missing", func() error { return nil }, worker.StatusFailed},
		{"not executable", func() error { return os.WriteFile(bin, []byte("#!/bin/sh\ncat\n"), 0o644) }, worker.StatusFailed},
		{"fixed", func() error { return os.Chmod(bin, 0o755) }, worker.StatusOK},
	}
	for _, st := range steps {
		if err := st.fix(); err != nil {
			t.Fatal(err)
		}
		res := p.Run(t.Context(), execTask("payload"))
		if res.Status != st.status {
			t.Errorf("%s: Run = %s (%v), want %s", st.name, res.Status, res.Err, st.status)
		}
		if st.status == worker.StatusOK && string(res.Output) != "payload" {
			t.Errorf("%s: Run output = %q, want %q", st.name, res.Output, "payload")
		}
	}
	if p.Busy() != 0 || p.Waiting() != 0 {
		t.Errorf("after Run: busy %d, waiting %d; want 0, 0", p.Busy(), p.Waiting())
	}
}

func TestPoolSizeRespected(t *testing.T) {
	const size = 3
	const tasks = size + 2
	dir := t.TempDir()
	running, seen := filepath.Join(dir, "running"), filepath.Join(dir, "seen")
	for _, d := range []string{running, seen} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// Each process marks itself running, records how many it sees, and
	// unmarks itself before exiting, i.e. before its slot is released.
	opts := execTestOptions(execScript(t, `touch "$RUNNING/$$"; ls "$RUNNING" | wc -l > "$SEEN/$$"; sleep 0.5; rm "$RUNNING/$$"`))
	opts.Env = map[string]string{"RUNNING": running, "SEEN": seen}
	opts.PoolSize = size
	p := execNewPool(t, opts)

	var maxBusy, maxWaiting atomic.Int64
	done := make(chan struct{})
	go func() {
		for {
			maxBusy.Store(max(maxBusy.Load(), int64(p.Busy())))
			maxWaiting.Store(max(maxWaiting.Load(), int64(p.Waiting())))
			select {
			case <-done:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	var wg sync.WaitGroup
	for i := range tasks {
		wg.Go(func() {
			if res := p.Run(t.Context(), execTask(strconv.Itoa(i))); res.Status != worker.StatusOK {
				t.Errorf("Run(task %d) = %s (%v), want ok", i, res.Status, res.Err)
			}
		})
	}
	wg.Wait()
	close(done)

	files, err := os.ReadDir(seen)
	if err != nil || len(files) != tasks {
		t.Fatalf("seen files = %d (%v), want %d", len(files), err, tasks)
	}
	most := 0
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(seen, f.Name()))
		n, aerr := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || aerr != nil {
			t.Fatalf("seen file %s = %q (%v, %v)", f.Name(), b, err, aerr)
		}
		most = max(most, n)
	}
	if most > size || most < 2 {
		t.Errorf("most executors seen running at once = %d, want 2..%d", most, size)
	}
	if maxBusy.Load() > size || maxWaiting.Load() < 1 {
		t.Errorf("sampled busy max %d, waiting max %d; want <= %d and >= 1", maxBusy.Load(), maxWaiting.Load(), size)
	}
}

func TestPoolCancel(t *testing.T) {
	opts := execTestOptions(execScript(t, "sleep 30"))
	opts.PoolSize, opts.MaxAttempts = 1, 3
	p := execNewPool(t, opts)
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
		}
	}
	runAsync := func(ctx context.Context) <-chan worker.TaskResult {
		ch := make(chan worker.TaskResult, 1)
		go func() { ch <- p.Run(ctx, execTask("")) }()
		return ch
	}
	result := func(ch <-chan worker.TaskResult) worker.TaskResult {
		t.Helper()
		select {
		case res := <-ch:
			return res
		case <-time.After(10 * time.Second):
			t.Fatal("Run did not return promptly after its context ended")
			return worker.TaskResult{}
		}
	}

	busyCtx, stopBusy := context.WithCancel(t.Context())
	defer stopBusy()
	busy := runAsync(busyCtx)
	waitFor("the slot to be taken", func() bool { return p.Busy() == 1 })

	queuedCtx, stopQueued := context.WithCancel(t.Context())
	queued := runAsync(queuedCtx)
	waitFor("a waiter", func() bool { return p.Waiting() == 1 })
	stopQueued()
	res := result(queued)
	if res.Status != worker.StatusFailed || res.Attempts != 0 || !errors.Is(res.Err, context.Canceled) {
		t.Errorf("queued Run = %s after %d attempts, %v; want failed after 0, context.Canceled", res.Status, res.Attempts, res.Err)
	}

	stopBusy()
	res = result(busy)
	if res.Status != worker.StatusFailed || res.Attempts != 1 || !errors.Is(res.Err, context.Canceled) {
		t.Errorf("running Run = %s after %d attempts, %v; want failed after 1, context.Canceled", res.Status, res.Attempts, res.Err)
	}
	if p.Busy() != 0 || p.Waiting() != 0 {
		t.Errorf("after cancel: busy %d, waiting %d; want 0, 0", p.Busy(), p.Waiting())
	}
}

func TestPoolEventsFromFd3(t *testing.T) {
	opts := execTestOptions(execScript(t, `
echo '{"annotation":{"kind":"progress","payload":{"pct":50,"step":"parse"}}}' >&3
echo 'not json' >&3
echo '{"labels":{"customer":"c1"}}' >&"$SVC_EVENTS_FD"
echo '{"unknown":{"x":1}}' >&3
printf '\n\n' >&3
echo '{"cache":{"key":"k1","value":"v1","scope":"cluster"}}' >&3
echo '{"cache":{"key":"k2","value":"v2","scope":"planet"}}' >&3
head -c 70000 /dev/zero | tr '\0' x >&3; echo >&3
echo '{"labels":{"tier":"gold"}}' >&3
echo '{"annotation":{"kind":"svc.fd3_invalid","payload":{}}}' >&3
cat
printf '{"cache":{"key":"k2","value":"v2"}}' >&3`))
	task := execTask("stdout is the result")
	task.Labels = map[string]string{"customer": "from-header"}
	res := execNewPool(t, opts).Run(t.Context(), task)
	if res.Status != worker.StatusOK || string(res.Output) != "stdout is the result" {
		t.Fatalf("Run = %s %q (%v), want ok with stdin echoed", res.Status, res.Output, res.Err)
	}
	want := []worker.Annotation{
		{Kind: "progress", Payload: map[string]any{"pct": 50.0, "step": "parse"}},
		{Kind: InvalidEventsKind, Payload: map[string]any{"ignored_lines": 5, "malformed": 4, "too_long": 1, "over_limit": 0}},
	}
	if !reflect.DeepEqual(res.Annotations, want) {
		t.Errorf("Run annotations = %+v, want %+v", res.Annotations, want)
	}
	if want := map[string]string{"customer": "c1", "tier": "gold"}; !reflect.DeepEqual(res.Labels, want) {
		t.Errorf("Run labels = %v, want %v", res.Labels, want)
	}
	wantCache := []worker.CacheWrite{{Key: "k1", Value: "v1", Scope: "cluster"}, {Key: "k2", Value: "v2", Scope: "local"}}
	if !reflect.DeepEqual(res.CacheWrites, wantCache) {
		t.Errorf("Run cache writes = %+v, want %+v", res.CacheWrites, wantCache)
	}
}

func TestPoolEventsWithoutFd3Writes(t *testing.T) {
	res := execNewPool(t, execTestOptions("cat")).Run(t.Context(), execTask("x"))
	if res.Status != worker.StatusOK || res.Annotations != nil || res.CacheWrites != nil || res.Labels != nil {
		t.Errorf("Run = %s, annotations %v, cache %v, labels %v; want ok and none", res.Status, res.Annotations, res.CacheWrites, res.Labels)
	}
}
