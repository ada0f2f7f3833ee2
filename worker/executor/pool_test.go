package executor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
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

	"svc/worker/model"
	"svc/worker/workertest"
	"svc/worker/workertest/wait"
)

// modes are the executor modes every behavioural pool test runs in.
var modes = []string{ModeSpawn, ModePersistent}

// newPool builds a pool closed when the test ends.
func newPool(t *testing.T, opts Options) *Pool {
	t.Helper()
	p, err := NewPool(opts)
	if err != nil {
		t.Fatalf("NewPool: %v", err)
	}
	t.Cleanup(p.Close)
	return p
}

// eachMode runs f as a parallel subtest per executor mode.
func eachMode(t *testing.T, f func(t *testing.T, mode string)) {
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			f(t, mode)
		})
	}
}

// countLines is the number of lines in path (0 when missing).
func countLines(t *testing.T, path string) int {
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
		{"bad mode", func(o *Options) { o.Mode = "forked" }, "executor.mode"},
		{"negative tasks per child", func(o *Options) { o.MaxTasksPerChild = -1 }, "executor.max_tasks_per_child"},
		{"negative ready timeout", func(o *Options) { o.ReadyTimeout = -time.Second }, "executor.ready_timeout"},
		{"huge output cap", func(o *Options) { o.MaxOutputBytes = 1 << 62 }, "executor.max_output_bytes"},
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
	p := newPool(t, Options{BinaryPath: "cat"})
	o := p.opts
	if p.Size() != runtime.NumCPU() || o.Timeout != 30*time.Second || o.MaxOutputBytes != 8<<20 ||
		o.MaxAttempts != 3 || o.StderrTail != 8<<10 || o.RetryBackoff != 0 || p.Busy() != 0 || p.Waiting() != 0 ||
		o.Mode != ModeSpawn || o.ReadyTimeout != 10*time.Second || o.MaxTasksPerChild != 0 {
		t.Errorf("NewPool(defaults) = size %d, %+v; want the documented defaults", p.Size(), o)
	}
}

func TestPoolBackoff(t *testing.T) {
	p := newPool(t, Options{BinaryPath: "cat", RetryBackoff: 100 * time.Millisecond})
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

func TestPoolEchoesInput(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789abcdef"), 16<<10) // 256 KiB, several pipe buffers
	eachMode(t, func(t *testing.T, mode string) {
		p := newPool(t, helperOptions(t, mode))
		for _, in := range [][]byte{nil, []byte("hello executor\n"), {0, 1, 2, 0xff, '\n', 0}, big} {
			res := p.Run(t.Context(), task(string(in)))
			if res.Status != model.StatusOK || res.Err != nil || res.ExitCode != 0 || res.Attempts != 1 {
				t.Fatalf("Run(%d bytes) = %s, %v, exit %d, %d attempts; want ok, exit 0, 1 attempt", len(in), res.Status, res.Err, res.ExitCode, res.Attempts)
			}
			if !bytes.Equal(res.Output, in) {
				t.Errorf("Run output = %d bytes, want the %d input bytes", len(res.Output), len(in))
			}
		}
	})
}

func TestPoolTaskMetadata(t *testing.T) {
	eachMode(t, func(t *testing.T, mode string) {
		p := newPool(t, helperOptions(t, mode))
		for _, tc := range []struct {
			key          []byte
			wantKey, enc string
		}{{[]byte("k1"), "k1", "utf-8"}, {[]byte{0xff, 0, 1}, "/wAB", "base64"}} {
			task := task("!view")
			task.Msg.Key = tc.key
			res := p.Run(t.Context(), task)
			var got helperTask
			if err := json.Unmarshal(res.Output, &got); err != nil || res.Status != model.StatusOK {
				t.Fatalf("Run(view) = %s %q (%v, %v)", res.Status, res.Output, res.Err, err)
			}
			want := helperTask{TaskID: "t-1", Source: "kafka", TopicAlias: "orders", Partition: 2, Offset: 42, Key: tc.wantKey, KeyEncoding: tc.enc}
			got.Labels, got.Env, got.Attempt = nil, nil, 0
			if !reflect.DeepEqual(got, want) {
				t.Errorf("executor saw %+v, want %+v", got, want)
			}
		}
	})
}

func TestPoolTempFailThenSuccess(t *testing.T) {
	eachMode(t, func(t *testing.T, mode string) {
		opts := helperOptions(t, mode)
		opts.MaxAttempts = 5
		var mu sync.Mutex
		var events []string
		opts.OnAttempt = func(task *model.Task, attempt int, res *model.AttemptResult) {
			mu.Lock()
			defer mu.Unlock()
			if res == nil {
				events = append(events, "start "+strconv.Itoa(attempt))
			} else {
				events = append(events, "end "+strconv.Itoa(attempt)+" "+res.Status)
			}
		}
		task := task("!count " + filepath.Join(t.TempDir(), "count"))
		task.Labels = map[string]string{"tenant": "acme", "region": "from-task"}
		res := newPool(t, opts).Run(t.Context(), task)
		if res.Status != model.StatusOK || res.Attempts != 3 || string(res.Output) != "done\n" || res.Err != nil {
			t.Fatalf("Run = %s after %d attempts, %q, %v; want ok after 3, %q", res.Status, res.Attempts, res.Output, res.Err, "done\n")
		}
		if res.Task != task || string(res.Stderr) != "attempt 3\n" || res.ExitCode != 0 {
			t.Errorf("Run = task %p, stderr %q, exit %d; want %p, the last attempt's stderr, 0", res.Task, res.Stderr, res.ExitCode, task)
		}
		wantAnn := []workertest.Ann{{Kind: "attempt", Payload: map[string]any{"n": 3.0}}}
		if !reflect.DeepEqual(anns(res.Annotations), wantAnn) {
			t.Errorf("Run annotations = %+v, want the last attempt's %+v", res.Annotations, wantAnn)
		}
		wantLabels := map[string]string{"tenant": "acme", "region": "from-executor", "attempt": "3"}
		if !reflect.DeepEqual(res.Labels, wantLabels) {
			t.Errorf("Run labels = %v, want %v", res.Labels, wantLabels)
		}
		if want := []model.CacheWrite{{Key: "seen", Value: "3", Scope: "cluster"}}; !reflect.DeepEqual(res.CacheWrites, want) {
			t.Errorf("Run cache writes = %+v, want %+v", res.CacheWrites, want)
		}
		if len(task.Labels) != 2 {
			t.Errorf("Run changed the task's labels to %v", task.Labels)
		}
		want := []string{"start 1", "end 1 tempfail", "start 2", "end 2 tempfail", "start 3", "end 3 ok"}
		if !reflect.DeepEqual(events, want) {
			t.Errorf("OnAttempt calls = %v, want %v", events, want)
		}
	})
}

func TestPoolRetriesUntilMaxAttempts(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, input string
		status      string
		errText     map[string]string
	}{
		{"tempfail", "!retry", model.StatusFailed, map[string]string{
			ModeSpawn: "executor asked to retry (exit 75) 3 times", ModePersistent: "executor asked to retry (status retry) 3 times"}},
		{"failed", "!fail", model.StatusFailed, map[string]string{
			ModeSpawn: "executor exited with code 3", ModePersistent: "executor answered status failed"}},
		{"timeout", "!sleep 30s", model.StatusTimeout, map[string]string{
			ModeSpawn: "executor timed out after TIMEOUT (executor.timeout)", ModePersistent: "executor timed out after TIMEOUT (executor.timeout)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eachMode(t, func(t *testing.T, mode string) {
				opts := helperOptions(t, mode)
				// Only the timeout case waits for executor.timeout; the others
				// get a bound no loaded machine reaches (a helper executor
				// start under -race on a busy box took over 2 s).
				opts.MaxAttempts, opts.Timeout = 3, time.Minute
				if tc.name == "timeout" {
					opts.Timeout = 2 * time.Second
					if testing.Short() {
						opts.Timeout = 500 * time.Millisecond // every attempt times out: 3 × the timeout
					}
				}
				want := strings.ReplaceAll(tc.errText[mode], "TIMEOUT", opts.Timeout.String())
				var attempts atomic.Int32
				opts.OnAttempt = func(_ *model.Task, _ int, res *model.AttemptResult) {
					if res != nil {
						attempts.Add(1)
					}
				}
				res := newPool(t, opts).Run(t.Context(), task(tc.input))
				if res.Status != tc.status || res.Attempts != 3 || attempts.Load() != 3 {
					t.Errorf("Run = %s after %d attempts (%d ended); want %s after 3", res.Status, res.Attempts, attempts.Load(), tc.status)
				}
				if res.Err == nil || res.Err.Error() != want {
					t.Errorf("Run error = %v, want %q", res.Err, want)
				}
			})
		})
	}
}

// A bad binary is the executor's failure, not the task's: a task that does
// not wait for the executor ends at once, charged no attempt, with an
// error naming executor.binary_path and the cause, and the pool reports
// itself unavailable.
func TestPoolBadBinaryFailsAtOnce(t *testing.T) {
	dir := t.TempDir()
	notExec := filepath.Join(dir, "plain.sh")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\necho hi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	notProgram := filepath.Join(dir, "data.bin")
	if err := os.WriteFile(notProgram, []byte{0x7f, 'E', 'L', 'F', 0, 0, 0, 0}, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, bin, want string }{
		{"missing", filepath.Join(dir, "nope"), "no such file or directory"},
		{"not executable", notExec, "permission denied"},
		{"directory", dir, "permission denied"},
		{"not in PATH", "svc-no-such-executor", "not found in $PATH"},
		{"not a program", notProgram, "exec format error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eachMode(t, func(t *testing.T, mode string) {
				opts := helperOptions(t, mode)
				opts.BinaryPath, opts.Args, opts.MaxAttempts = tc.bin, nil, 3
				p := newPool(t, opts)
				for range 2 { // the second finds the pool already failing
					res := p.Run(t.Context(), task("in"))
					if res.Status != model.StatusFailed || res.Attempts != 0 || res.ExitCode != -1 || !errors.Is(res.Err, ErrStart) ||
						!errors.Is(res.Err, model.ErrExecutorUnavailable) {
						t.Fatalf("Run(%s) = %s after %d attempts, exit %d, %v; want failed after 0 (none charged), exit -1, ErrStart and ErrExecutorUnavailable",
							tc.bin, res.Status, res.Attempts, res.ExitCode, res.Err)
					}
					if msg := res.Err.Error(); !strings.Contains(msg, "executor.binary_path") || !strings.Contains(msg, tc.want) {
						t.Errorf("Run(%s) error = %q, want it to name executor.binary_path and say %q", tc.bin, msg, tc.want)
					}
				}
				if h := p.ExecutorHealth(); h.State != model.ExecutorUnavailable || !strings.Contains(h.Reason, "executor.binary_path") {
					t.Errorf("ExecutorHealth = %+v, want unavailable naming executor.binary_path", h)
				}
			})
		})
	}
}

func TestPoolRecoversOnceBinaryIsFixed(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	eachMode(t, func(t *testing.T, mode string) {
		bin := filepath.Join(t.TempDir(), "executor.sh")
		opts := helperOptions(t, mode)
		opts.BinaryPath, opts.Args = bin, nil
		p := newPool(t, opts)
		steps := []struct {
			name   string
			fix    func() error
			status string
		}{
			{"missing", func() error { return nil }, model.StatusFailed},
			{"not executable", func() error { return os.WriteFile(bin, []byte("#!/bin/sh\nexec "+self+" exec-helper\n"), 0o644) }, model.StatusFailed},
			{"fixed", func() error { return os.Chmod(bin, 0o755) }, model.StatusOK},
		}
		for _, st := range steps {
			if err := st.fix(); err != nil {
				t.Fatal(err)
			}
			res := p.Run(t.Context(), task("payload"))
			// A persistent seat backs off between failed starts: the fix is
			// picked up at its next start.
			for deadline := time.Now().Add(30 * time.Second); st.status == model.StatusOK && res.Status != model.StatusOK && time.Now().Before(deadline); {
				time.Sleep(50 * time.Millisecond)
				res = p.Run(t.Context(), task("payload"))
			}
			if res.Status != st.status {
				t.Errorf("%s: Run = %s (%v), want %s", st.name, res.Status, res.Err, st.status)
			}
			if st.status == model.StatusOK && string(res.Output) != "payload" {
				t.Errorf("%s: Run output = %q, want %q", st.name, res.Output, "payload")
			}
		}
		if p.Busy() != 0 || p.Waiting() != 0 {
			t.Errorf("after Run: busy %d, waiting %d; want 0, 0", p.Busy(), p.Waiting())
		}
	})
}

func TestPoolSizeRespected(t *testing.T) {
	t.Parallel()
	const size = 3
	const tasks = 3 * size
	eachMode(t, func(t *testing.T, mode string) {
		opts := helperOptions(t, mode)
		opts.PoolSize = size
		p := newPool(t, opts)
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
				if res := p.Run(t.Context(), task("!sleep 300ms")); res.Status != model.StatusOK {
					t.Errorf("Run(task %d) = %s (%v), want ok", i, res.Status, res.Err)
				}
			})
		}
		wg.Wait()
		close(done)
		if maxBusy.Load() > size || maxBusy.Load() < 2 || maxWaiting.Load() < 1 {
			t.Errorf("sampled busy max %d, waiting max %d; want 2..%d and >= 1", maxBusy.Load(), maxWaiting.Load(), size)
		}
	})
}

func TestPoolCancel(t *testing.T) {
	eachMode(t, func(t *testing.T, mode string) {
		opts := helperOptions(t, mode)
		opts.PoolSize, opts.MaxAttempts = 1, 3
		p := newPool(t, opts)
		runAsync := func(ctx context.Context) <-chan model.TaskResult {
			ch := make(chan model.TaskResult, 1)
			go func() { ch <- p.Run(ctx, task("!sleep 30s")) }()
			return ch
		}
		result := func(ch <-chan model.TaskResult) model.TaskResult {
			t.Helper()
			select {
			case res := <-ch:
				return res
			case <-time.After(10 * time.Second):
				t.Fatal("Run did not return promptly after its context ended")
				return model.TaskResult{}
			}
		}

		busyCtx, stopBusy := context.WithCancel(t.Context())
		defer stopBusy()
		busy := runAsync(busyCtx)
		wait.For(t, wait.Long, "the slot to be taken", func() (bool, string) { return p.Busy() == 1, fmt.Sprintf("%d busy", p.Busy()) })

		queuedCtx, stopQueued := context.WithCancel(t.Context())
		queued := runAsync(queuedCtx)
		wait.For(t, wait.Long, "a waiter", func() (bool, string) { return p.Waiting() == 1, fmt.Sprintf("%d waiting", p.Waiting()) })
		stopQueued()
		res := result(queued)
		if res.Status != model.StatusFailed || res.Attempts != 0 || !errors.Is(res.Err, context.Canceled) {
			t.Errorf("queued Run = %s after %d attempts, %v; want failed after 0, context.Canceled", res.Status, res.Attempts, res.Err)
		}

		stopBusy()
		res = result(busy)
		if res.Status != model.StatusFailed || res.Attempts != 1 || !errors.Is(res.Err, context.Canceled) {
			t.Errorf("running Run = %s after %d attempts, %v; want failed after 1, context.Canceled", res.Status, res.Attempts, res.Err)
		}
		if p.Busy() != 0 || p.Waiting() != 0 {
			t.Errorf("after cancel: busy %d, waiting %d; want 0, 0", p.Busy(), p.Waiting())
		}
		// The pool still serves (persistent: a fresh child).
		if res := p.Run(t.Context(), task("after")); res.Status != model.StatusOK || string(res.Output) != "after" {
			t.Errorf("Run after cancel = %s %q (%v), want ok", res.Status, res.Output, res.Err)
		}
	})
}

func TestPoolExecutorEvents(t *testing.T) {
	eachMode(t, func(t *testing.T, mode string) {
		task := task("!events")
		task.Labels = map[string]string{"customer": "from-header", "tier": "gold"}
		res := newPool(t, helperOptions(t, mode)).Run(t.Context(), task)
		if res.Status != model.StatusOK || string(res.Output) != "with events" {
			t.Fatalf("Run = %s %q (%v), want ok", res.Status, res.Output, res.Err)
		}
		want := []workertest.Ann{
			{Kind: "progress", Payload: map[string]any{"pct": 50.0}},
			{Kind: InvalidEventsKind, Payload: map[string]any{"ignored_lines": 2.0, "malformed": 2.0, "too_long": 0.0, "over_limit": 0.0}},
		}
		if !reflect.DeepEqual(anns(res.Annotations), want) {
			t.Errorf("Run annotations = %+v, want %+v", res.Annotations, want)
		}
		if want := map[string]string{"customer": "c1", "tier": "gold"}; !reflect.DeepEqual(res.Labels, want) {
			t.Errorf("Run labels = %v, want %v", res.Labels, want)
		}
		if want := []model.CacheWrite{{Key: "k1", Value: "v1", Scope: "cluster"}}; !reflect.DeepEqual(res.CacheWrites, want) {
			t.Errorf("Run cache writes = %+v, want %+v", res.CacheWrites, want)
		}
	})
}

func TestPoolStderrPerTask(t *testing.T) {
	eachMode(t, func(t *testing.T, mode string) {
		opts := helperOptions(t, mode)
		opts.PoolSize, opts.StderrTail = 1, 100
		p := newPool(t, opts)
		for i := range 5 {
			msg := fmt.Sprintf("task %d says %s", i, strings.Repeat("x", 150))
			res := p.Run(t.Context(), task("!stderr "+msg))
			if want := msg[len(msg)-100:]; res.Status != model.StatusOK || string(res.Stderr) != want {
				t.Errorf("Run %d stderr = %q (%s), want its own last 100 bytes %q", i, res.Stderr, res.Status, want)
			}
		}
		if res := p.Run(t.Context(), task("quiet")); len(res.Stderr) != 0 {
			t.Errorf("Run(quiet) stderr = %q, want none", res.Stderr)
		}
	})
}

func TestPoolOutputCap(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		n      int
		status string
	}{{1000, model.StatusOK}, {1001, model.StatusFailed}, {1 << 20, model.StatusFailed}} {
		t.Run(strconv.Itoa(tc.n), func(t *testing.T) {
			eachMode(t, func(t *testing.T, mode string) {
				opts := helperOptions(t, mode)
				opts.MaxOutputBytes = 1000
				p := newPool(t, opts)
				res := p.Run(t.Context(), task("!big "+strconv.Itoa(tc.n)))
				if res.Status != tc.status {
					t.Fatalf("Run = %s (%v), want %s", res.Status, res.Err, tc.status)
				}
				if tc.status == model.StatusOK {
					return
				}
				if !res.OutputTruncated || !errors.Is(res.Err, ErrOutputTooLarge) || len(res.Output) > 1000 {
					t.Errorf("Run truncated %v, %d bytes, error %v; want true, at most 1000, ErrOutputTooLarge", res.OutputTruncated, len(res.Output), res.Err)
				}
				if !strings.Contains(res.Err.Error(), "output exceeds executor.max_output_bytes (1000)") {
					t.Errorf("Run error = %q, want it to name executor.max_output_bytes (1000)", res.Err)
				}
				if res := p.Run(t.Context(), task("next")); res.Status != model.StatusOK || string(res.Output) != "next" {
					t.Errorf("Run after overflow = %s %q (%v), want ok", res.Status, res.Output, res.Err)
				}
			})
		})
	}
}

func TestPoolTimeoutKillsProcessGroup(t *testing.T) {
	t.Parallel()
	eachMode(t, func(t *testing.T, mode string) {
		// A loaded machine can take longer than the timeout to start the
		// helper (spawn mode counts start-up), and then no grandchild
		// exists to check: try again with a longer timeout.
		var p *Pool
		pidFile := filepath.Join(t.TempDir(), "grandchild.pid")
		for timeout := time.Second; ; timeout *= 4 {
			opts := helperOptions(t, mode)
			opts.Timeout, opts.PoolSize = timeout, 1
			p = newPool(t, opts)
			res := p.Run(t.Context(), task("!hang "+pidFile))
			if res.Status != model.StatusTimeout || res.ExitCode != -1 || res.Err == nil || !strings.Contains(res.Err.Error(), "executor.timeout") {
				t.Errorf("Run = %s exit %d (%v), want timeout exit -1 naming executor.timeout", res.Status, res.ExitCode, res.Err)
			}
			if _, err := os.Stat(pidFile); err == nil || timeout >= 16*time.Second {
				break
			}
		}
		waitGone(t, readPid(t, pidFile))
		if mode == ModeSpawn {
			return
		}
		if res := p.Run(t.Context(), task("next")); res.Status != model.StatusOK || string(res.Output) != "next" {
			t.Errorf("Run after timeout = %s %q (%v), want ok from a fresh child", res.Status, res.Output, res.Err)
		}
	})
}
