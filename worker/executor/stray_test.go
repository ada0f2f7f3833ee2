package executor

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"svc/worker/model"
)

// strayPool is a persistent helper pool of one child whose stdout
// misbehaves as env says, logging as JSON into the returned log.
func strayPool(t *testing.T, env map[string]string) (*Pool, *strayLog) {
	t.Helper()
	l := &strayLog{}
	p, _ := persistentPool(t, func(o *Options) {
		o.PoolSize, o.MaxAttempts, o.Env = 1, 3, env
		o.Logger = slog.New(slog.NewJSONHandler(&lockedWriter{w: &l.b, mu: &l.mu}, nil))
	})
	return p, l
}

// strayLog is a pool's JSON log.
type strayLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// violations are the executor_child_protocol_violation records.
func (l *strayLog) violations(t *testing.T) []map[string]any {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(l.b.Bytes()))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("log line %q: %v", sc.Bytes(), err)
		}
		if m["msg"] == "executor_child_protocol_violation" {
			out = append(out, m)
		}
	}
	return out
}

// violationsWith are the violation records whose detail holds want.
func (l *strayLog) violationsWith(t *testing.T, want string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, r := range l.violations(t) {
		if d, _ := r["detail"].(string); strings.Contains(d, want) {
			out = append(out, r)
		}
	}
	return out
}

// runInputs runs each input in turn as its own task and fails t unless
// every result is ok at the first attempt with its own input as output.
func runInputs(t *testing.T, p *Pool, pause time.Duration, inputs ...string) {
	t.Helper()
	for i, in := range inputs {
		if i > 0 {
			time.Sleep(pause)
		}
		task := task(in)
		task.ID = "t-" + in
		res := p.Run(t.Context(), task)
		if res.Status != model.StatusOK || string(res.Output) != in || res.Attempts != 1 {
			t.Errorf("Run(%s) = %s %q after %d attempts (%v); want ok %q at the first attempt",
				in, res.Status, res.Output, res.Attempts, res.Err, in)
		}
	}
}

var abcd = []string{"AAA", "BBB", "CCC", "DDD"}

// wantViolations checks the violations counted and logged: at least
// min (at most max) in all, each of a kind in kinds, logged with the
// child's pid, a task outcome in tasks and a detail with want; and never
// the bytes the child wrote.
func wantViolations(t *testing.T, p *Pool, l *strayLog, min, max int, kinds, tasks []string, want string) {
	t.Helper()
	counted := 0.0
	for _, k := range violationKinds {
		n := metricValue(p.backend.(*persistent).metrics.violations.WithLabelValues(k))
		if n > 0 && !strings.Contains(strings.Join(kinds, " "), k) {
			t.Errorf("violations{kind=%s} = %v, want none of that kind", k, n)
		}
		counted += n
	}
	logged := l.violations(t)
	if counted != float64(len(logged)) || len(logged) < min || len(logged) > max {
		t.Errorf("%v violations counted, %d logged; want as many, %d to %d", counted, len(logged), min, max)
	}
	for _, r := range logged {
		kind, _ := r["kind"].(string)
		task, _ := r["task"].(string)
		detail, _ := r["detail"].(string)
		if pid, _ := r["pid"].(float64); pid <= 0 || !strings.Contains(strings.Join(kinds, " "), kind) ||
			!strings.Contains(strings.Join(tasks, " "), task) || !strings.Contains(detail, want) || r["level"] != "WARN" {
			t.Errorf("violation logged as %v; want WARN, pid, kind in %v, task in %v, detail with %q", r, kinds, tasks, want)
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, b := range []string{"STALE", "debug", "UNSOLICITED"} {
		if strings.Contains(l.b.String(), b) {
			t.Errorf("the log shows what the child wrote (%q):\n%s", b, l.b.String())
		}
	}
}

// Issue 24: a child writing one extra frame after each result shifted
// every later result onto the wrong message (BBB answered STALE-AAA).
// The frame is seen behind the result: the task keeps its answer and the
// child is replaced.
func TestPersistentExtraFrameAfterEachResult(t *testing.T) {
	t.Parallel()
	p, l := strayPool(t, map[string]string{"HELPER_STRAY": "frame"})
	runInputs(t, p, 0, abcd...)
	wantViolations(t, p, l, 4, 4, []string{violationUnsolicited}, []string{"answered"}, "binary output (a frame?) on stdout behind the result")
	if n := restarts(t, p, reasonProtocol); n < 3 {
		t.Errorf("restarts{reason=protocol} = %v, want a child per task", n)
	}
}

// A stray frame that arrives after the next task was sent is told apart
// by the task it names: the task goes to a fresh child at no cost.
func TestPersistentResultNamingAnotherTask(t *testing.T) {
	t.Parallel()
	p, l := strayPool(t, map[string]string{"HELPER_STRAY": "stale-late"})
	runInputs(t, p, 0, abcd...)
	wantViolations(t, p, l, 3, 3, []string{violationWrongTask}, []string{"rerun"}, `the result names task_id "t-`)
}

// A child that named its tasks and then sends a result naming none: a
// stray (it answered before), the task moves at no cost.
func TestPersistentResultNamingNoTaskAfterNamingThem(t *testing.T) {
	t.Parallel()
	p, l := strayPool(t, map[string]string{"HELPER_STRAY": "stale-late-anon"})
	runInputs(t, p, 0, abcd...)
	wantViolations(t, p, l, 3, 3, []string{violationWrongTask}, []string{"rerun"}, "names no task_id")
}

// A child writing a frame before it was sent any task is replaced before
// it gets one.
func TestPersistentFrameBeforeAnyTask(t *testing.T) {
	t.Parallel()
	p, l := strayPool(t, map[string]string{"HELPER_UNSOLICITED_ONCE": filepath.Join(t.TempDir(), "once")})
	runInputs(t, p, 0, abcd...)
	wantViolations(t, p, l, 1, 1, []string{violationUnsolicited}, []string{"rerun"}, "binary output (a frame?) on stdout before the task was sent")
}

// Children that all write unasked frames: the task fails after its
// attempts (each one moved once at no cost), never loops.
func TestPersistentEveryChildWritesUnasked(t *testing.T) {
	t.Parallel()
	p, l := strayPool(t, map[string]string{"HELPER_UNSOLICITED": "always"})
	p.opts.MaxAttempts = 2
	res := p.Run(t.Context(), task("AAA"))
	if res.Status != model.StatusFailed || res.Attempts != 2 || res.Err == nil || !strings.Contains(res.Err.Error(), "protocol violation") {
		t.Errorf("Run = %s %q after %d attempts (%v); want failed after 2 with a protocol violation", res.Status, res.Output, res.Attempts, res.Err)
	}
	wantViolations(t, p, l, 4, 4, []string{violationUnsolicited}, []string{"rerun", "attempt_failed"}, "before the task was sent")
}

// A debug line on stdout after a result used to fail the next, innocent
// task with `frame length prefix is text "debu"`.
func TestPersistentTextLineAfterResult(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, stray, delay string
		pause              time.Duration
		min, max           int
		kinds, tasks       []string
		detail             string
	}{
		{"in the result's write", "text", "", 0, 4, 4,
			[]string{violationUnsolicited}, []string{"answered"}, "text (a print to stdout?) on stdout behind the result"},
		// Seen before the next task is sent; or behind the result when
		// the line came before the worker read it.
		{"before the next task", "text-later", "0s", 200 * time.Millisecond, 3, 4,
			[]string{violationUnsolicited}, []string{"rerun", "answered"}, "text (a print to stdout?)"},
		// Read in place of the next task's result; or (a worker slower
		// than the child's 100ms) before the next task is sent.
		{"after the next task was sent", "text-later", "100ms", 0, 3, 3,
			[]string{violationMalformed, violationUnsolicited}, []string{"rerun"}, "text"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, l := strayPool(t, map[string]string{"HELPER_STRAY": tc.stray, "HELPER_STRAY_DELAY": tc.delay})
			runInputs(t, p, tc.pause, abcd...)
			wantViolations(t, p, l, tc.min, tc.max, tc.kinds, tc.tasks, tc.detail)
		})
	}
}

// Text in place of the first result of a child is its answer: the task
// is charged (protocol v1 output), not moved at no cost.
func TestPersistentTextFromAFreshChildIsCharged(t *testing.T) {
	t.Parallel()
	p, l := strayPool(t, nil)
	res := p.Run(t.Context(), task("!garbage"))
	if res.Status != model.StatusFailed || res.Attempts != 3 {
		t.Errorf("Run(garbage) = %s after %d attempts (%v); want failed after 3", res.Status, res.Attempts, res.Err)
	}
	wantViolations(t, p, l, 3, 3, []string{violationMalformed}, []string{"attempt_failed"}, "text where a frame length prefix should be")
}

func TestExecEchoNamesOther(t *testing.T) {
	for _, tc := range []struct {
		echo echo
		want bool
	}{
		{echo{}, false},
		{echo{taskID: "t-1"}, false},
		{echo{taskID: "t-1", attempt: 2}, false},
		{echo{attempt: 2}, false},
		{echo{taskID: "t-0"}, true},
		{echo{taskID: "t-1", attempt: 1}, true},
		{echo{attempt: 3}, true},
	} {
		if got := tc.echo.namesOther("t-1", 2); got != tc.want {
			t.Errorf("%+v.namesOther(t-1, 2) = %v, want %v", tc.echo, got, tc.want)
		}
	}
}

// Stderr a child writes after its result is never the next task's: it
// goes with the answered task when it came before the worker read the
// result's stderr, else to no task.
func TestPersistentStderrBetweenTasksBelongsToNone(t *testing.T) {
	t.Parallel()
	p, _ := strayPool(t, nil) // one child: the next task goes to it
	for i := range 3 {
		res := p.Run(t.Context(), task("!stderr-late LATE"))
		if res.Status != model.StatusOK || (len(res.Stderr) != 0 && string(res.Stderr) != "LATE") {
			t.Fatalf("task %d = %s (%v), stderr %q; want ok, stderr empty or its own late line", i, res.Status, res.Err, res.Stderr)
		}
		time.Sleep(100 * time.Millisecond) // the late line reaches the pipe
		res = p.Run(t.Context(), task("!stderr OWN"))
		if res.Status != model.StatusOK || string(res.Stderr) != "OWN" {
			t.Fatalf("next task %d = %s (%v), stderr %q; want ok with its own stderr \"OWN\" only", i, res.Status, res.Err, res.Stderr)
		}
	}
}

// Issue 38: a child that did not echo task_id and attempt and wrote a
// second result frame 20 ms late had its results shifted onto other
// tasks (404 of 500 sink records held another message's result), since
// a late frame that reaches the pipe after the next task frame was sent
// looks like that task's answer. A result that does not name its task is
// never taken: no task ever gets another's output, and such an executor
// fails every attempt, saying why.
func TestPersistentNoEchoNeverShiftsResults(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		env  map[string]string
	}{
		// Deterministic: the stale frame goes out once the next task
		// frame was read, right before that task's own result.
		{"stale frame after the next task was read", map[string]string{"HELPER_STRAY": "stale-late-anon", "HELPER_ECHO": "0"}},
		// The executor: a second frame 20 ms after each result,
		// tasks of 8 ms (the frame comes while a later task runs).
		{"second frame 20ms late", map[string]string{"HELPER_STRAY": "late", "HELPER_STRAY_DELAY": "20ms", "HELPER_SERVE_DELAY": "8ms", "HELPER_ECHO": "0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, l := strayPool(t, tc.env)
			const n = 8
			for i := range n {
				in := fmt.Sprintf("in-%d", i)
				task := task(in)
				task.ID = "t-" + in
				res := p.Run(t.Context(), task)
				if res.Output != nil && string(res.Output) != in {
					t.Errorf("task %s got %q: another task's result", task.ID, res.Output)
				}
				if res.Status != model.StatusFailed || res.Err == nil || !strings.Contains(res.Err.Error(), "protocol v2 requires them") {
					t.Errorf("task %s = %s %q (%v); want failed: the executor does not name its tasks", task.ID, res.Status, res.Output, res.Err)
				}
			}
			// 3 attempts a task, each a violation (a late frame may show
			// up first, as unsolicited output, and move the task at no
			// cost once).
			wantViolations(t, p, l, 3*n, 6*n, []string{violationWrongTask, violationUnsolicited},
				[]string{"attempt_failed", "rerun"}, "")
			if got := len(l.violationsWith(t, "the result names no task_id and no attempt; protocol v2 requires")); got < 3*n {
				t.Errorf("%d violations say the result names no task_id and no attempt, want one per attempt (%d)", got, 3*n)
			}
		})
	}
}

// With task_id and attempt echoed, late frames in any phase (while the
// child is idle, after the next task frame went out, behind the next
// result) never shift a result: every task gets its own answer at its
// first attempt.
func TestPersistentLateFramesNamingTheirTask(t *testing.T) {
	t.Parallel()
	p, l := strayPool(t, map[string]string{"HELPER_STRAY": "late", "HELPER_STRAY_DELAY": "20ms", "HELPER_SERVE_DELAY": "8ms"})
	var inputs []string
	for i := range 30 {
		inputs = append(inputs, fmt.Sprintf("in-%d", i))
		if i%3 == 2 { // let some late frames reach an idle child
			inputs = append(inputs, "!sleep 30ms")
		}
	}
	for i, in := range inputs {
		task := task(in)
		task.ID = fmt.Sprintf("t-%d", i)
		res := p.Run(t.Context(), task)
		want := in
		if strings.HasPrefix(in, "!sleep") {
			want = "slept"
		}
		if res.Status != model.StatusOK || string(res.Output) != want || res.Attempts != 1 {
			t.Errorf("task %s = %s %q after %d attempts (%v); want ok %q at the first attempt", task.ID, res.Status, res.Output, res.Attempts, res.Err, want)
		}
	}
	wantViolations(t, p, l, 1, len(inputs), []string{violationWrongTask, violationUnsolicited}, []string{"rerun", "answered"}, "")
}

// A task without an id (a library caller's) is sent one of its own, which
// its result names: it is answered, not refused for a missing echo.
func TestPersistentTaskWithoutID(t *testing.T) {
	t.Parallel()
	p, l := strayPool(t, nil)
	for range 2 {
		task := task("!view")
		task.ID = ""
		res := p.Run(t.Context(), task)
		var seen helperTask
		if res.Status != model.StatusOK || json.Unmarshal(res.Output, &seen) != nil || !strings.HasPrefix(seen.TaskID, "svc-unnamed-") {
			t.Errorf("Run(no id) = %s %s (%v); want ok, the task sent as svc-unnamed-N", res.Status, res.Output, res.Err)
		}
		if task.ID != "" {
			t.Errorf("the caller's task got id %q; want it left alone", task.ID)
		}
	}
	wantViolations(t, p, l, 0, 0, nil, nil, "")
}
