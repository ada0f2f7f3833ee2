package executor

import (
	"bytes"
	"encoding/binary"
	"errors"
	"log/slog"
	"math/rand/v2"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"svc/worker/model"
)

// persistentPool is a persistent helper pool with its own metrics.
func persistentPool(t *testing.T, edit func(*Options)) (*Pool, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	opts := helperOptions(t, ModePersistent)
	opts.Registerer = reg
	if edit != nil {
		edit(&opts)
	}
	return newPool(t, opts), reg
}

// restarts is svc_executor_restarts_total{reason}.
func restarts(t *testing.T, p *Pool, reason string) float64 {
	t.Helper()
	return metricValue(p.backend.(*persistent).metrics.restarts.WithLabelValues(reason))
}

// metricValue reads a counter or gauge.
func metricValue(m prometheus.Metric) float64 {
	var d dto.Metric
	if m.Write(&d) != nil {
		return -1
	}
	if d.Counter != nil {
		return d.Counter.GetValue()
	}
	return d.Gauge.GetValue()
}

// pid runs a task that answers its child's pid.
func pid(t *testing.T, p *Pool) int {
	t.Helper()
	res := p.Run(t.Context(), task("!pid"))
	pid, err := strconv.Atoi(string(res.Output))
	if res.Status != model.StatusOK || err != nil {
		t.Fatalf("Run(pid) = %s %q (%v)", res.Status, res.Output, res.Err)
	}
	return pid
}

func TestPersistentChildServesManyTasks(t *testing.T) {
	t.Parallel()
	p, _ := persistentPool(t, func(o *Options) { o.PoolSize = 1 })
	first := pid(t, p)
	for range 20 {
		if pid := pid(t, p); pid != first {
			t.Fatalf("task ran in child %d, want the long-lived child %d", pid, first)
		}
	}
}

func TestPersistentFailuresReplaceTheChild(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, input, reason, errText string
		restarts                     float64
	}{
		{"crash mid-frame", "!crash", reasonExited, "executor exited in the middle of its result frame (exit status 1)", 1},
		// Text from a child that answered before may be a stray print:
		// the task gets one fresh child at no cost, which answers text too.
		{"garbage", "!garbage", reasonProtocol, "is the executor speaking protocol v2?", 2},
		{"oversized", "!big 5000", reasonOversized, "output exceeds executor.max_output_bytes (1000)", 1},
		{"hang", "!sleep 1h", reasonTimeout, "executor timed out after 1s (executor.timeout)", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, _ := persistentPool(t, func(o *Options) { o.PoolSize, o.MaxOutputBytes, o.Timeout = 1, 1000, time.Second })
			before := pid(t, p)
			res := p.Run(t.Context(), task(tc.input))
			if res.Status == model.StatusOK || res.Err == nil || !strings.Contains(res.Err.Error(), tc.errText) {
				t.Errorf("Run(%s) = %s (%v), want a failure saying %q", tc.input, res.Status, res.Err, tc.errText)
			}
			waitGone(t, before)
			if after := pid(t, p); after == before {
				t.Errorf("next task ran in the old child %d, want a fresh one", before)
			}
			if n := restarts(t, p, tc.reason); n != tc.restarts {
				t.Errorf("restarts{reason=%s} = %v, want %v", tc.reason, n, tc.restarts)
			}
		})
	}
}

func TestPersistentExitAfterEveryTask(t *testing.T) {
	t.Parallel()
	p, _ := persistentPool(t, func(o *Options) {
		o.PoolSize, o.Env = 2, map[string]string{"HELPER_EXIT_AFTER_TASK": "1"}
	})
	for i := range 10 {
		res := p.Run(t.Context(), task("!pid"))
		if res.Status != model.StatusOK || res.Attempts != 1 {
			t.Fatalf("Run %d = %s after %d attempts (%v); want ok at the first attempt", i, res.Status, res.Attempts, res.Err)
		}
	}
	if n := restarts(t, p, reasonExited); n < 8 {
		t.Errorf("restarts{reason=exited} = %v, want about one per task", n)
	}
}

func TestPersistentNeverReady(t *testing.T) {
	t.Parallel()
	for _, start := range []string{"never-ready", "garbage", "crash"} {
		t.Run(start, func(t *testing.T) {
			t.Parallel()
			p, _ := persistentPool(t, func(o *Options) {
				o.MaxAttempts, o.Env = 3, map[string]string{"HELPER_START": start}
				if start == "never-ready" {
					o.ReadyTimeout = 300 * time.Millisecond
				}
			})
			res := p.Run(t.Context(), task("in"))
			if res.Status != model.StatusFailed || res.Attempts != 0 || !errors.Is(res.Err, ErrStart) || !errors.Is(res.Err, model.ErrExecutorUnavailable) {
				t.Fatalf("Run = %s after %d attempts (%v); want failed after 0 (none charged) with ErrStart and ErrExecutorUnavailable", res.Status, res.Attempts, res.Err)
			}
			want := map[string]string{"never-ready": "executor.ready_timeout", "garbage": "protocol v2",
				"crash": `exited before its ready frame (exit status 1); stderr: "helper: cannot load the model"`}[start]
			if !strings.Contains(res.Err.Error(), want) {
				t.Errorf("Run error = %q, want it to say %q", res.Err, want)
			}
		})
	}
}

func TestPersistentCrashLoopBacksOff(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	var logMu sync.Mutex
	p, reg := persistentPool(t, func(o *Options) {
		o.PoolSize, o.Env = 2, map[string]string{"HELPER_START": "crash"}
		o.Logger = slog.New(slog.NewTextHandler(&lockedWriter{w: &logs, mu: &logMu}, nil))
	})
	p.Run(t.Context(), task("in")) // starts the seats
	time.Sleep(2 * time.Second)
	starts := restarts(t, p, reasonNotReady)
	// Without backoff two seats would restart hundreds of times in 2 s.
	if starts < 4 || starts > 30 {
		t.Errorf("restarts{reason=not_ready} after 2s = %v, want a handful (backoff)", starts)
	}
	if n := metricValue(p.backend.(*persistent).metrics.crashLoops); n != 1 {
		t.Errorf("svc_executor_crash_loops_total = %v, want 1 episode", n)
	}
	logMu.Lock()
	n := strings.Count(logs.String(), "executor_crash_loop ")
	logMu.Unlock()
	if n != 1 {
		t.Errorf("executor_crash_loop logged %d times, want once per episode:\n%s", n, logs.String())
	}
	fams, err := reg.Gather()
	names := map[string]bool{}
	for _, f := range fams {
		names[f.GetName()] = true
	}
	for _, n := range []string{"svc_executor_restarts_total", "svc_executor_crash_loops_total", "svc_executor_crash_loop_active", "svc_executor_children_ready"} {
		if !names[n] {
			t.Errorf("registry lacks %s (%v)", n, err)
		}
	}
}

// A pool where one seat's children crash at start-up keeps serving with
// the others.
func TestPersistentCrashLoopingSeatDoesNotStopOthers(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	self, _ := os.Executable()
	p, _ := persistentPool(t, func(o *Options) {
		o.PoolSize = 3
		// Every start after the first two crashes: one seat crash-loops.
		o.BinaryPath, o.Args = "/bin/sh", []string{"-c", `mkdir "$DIR/a" 2>/dev/null || mkdir "$DIR/b" 2>/dev/null || { echo broken >&2; exit 1; }; exec "$SELF" exec-helper`}
		o.Env = map[string]string{"DIR": dir, "SELF": self}
	})
	for i := range 30 {
		if res := p.Run(t.Context(), task("ok")); res.Status != model.StatusOK {
			t.Fatalf("Run %d = %s (%v), want ok from the healthy children", i, res.Status, res.Err)
		}
	}
}

func TestPersistentMaxTasksPerChild(t *testing.T) {
	t.Parallel()
	p, _ := persistentPool(t, func(o *Options) { o.PoolSize, o.MaxTasksPerChild = 1, 3 })
	var pids []int
	for range 9 {
		pids = append(pids, pid(t, p))
	}
	for i := range pids {
		if same := pids[i] == pids[i/3*3]; !same {
			t.Fatalf("children per task = %v, want a new child every 3 tasks", pids)
		}
	}
	if pids[0] == pids[3] || pids[3] == pids[6] {
		t.Errorf("children per task = %v, want a new child every 3 tasks", pids)
	}
	waitGone(t, pids[0])
	if n := restarts(t, p, reasonRecycled); n < 2 {
		t.Errorf("restarts{reason=recycled} = %v, want 2", n)
	}
}

func TestPersistentCloseStopsChildren(t *testing.T) {
	t.Parallel()
	p, _ := persistentPool(t, func(o *Options) { o.PoolSize, o.StopGrace = 2, 200*time.Millisecond })
	a, b := pid(t, p), pid(t, p)
	p.Close()
	waitGone(t, a)
	waitGone(t, b)
	if res := p.Run(t.Context(), task("late")); res.Status != model.StatusFailed || !errors.Is(res.Err, errPoolClosed) {
		t.Errorf("Run after Close = %s (%v), want failed: pool closed", res.Status, res.Err)
	}
}

// At least 10,000 tasks through 4 children while children are killed at
// random, until at least 5 were killed: every task ends ok (retried when
// its child died under it), and no task runs in two children at once.
func TestPersistentRandomKills(t *testing.T) {
	if testing.Short() {
		t.Skip("long")
	}
	t.Parallel()
	const tasks = 10_000
	p, _ := persistentPool(t, func(o *Options) {
		o.PoolSize, o.MaxAttempts, o.Env = 4, 5, map[string]string{"HELPER_POOL": t.Name()}
	})
	var mu sync.Mutex
	running := map[string]bool{}
	twice := 0
	p.opts.OnAttempt = func(task *model.Task, _ int, res *model.AttemptResult) {
		mu.Lock()
		defer mu.Unlock()
		if res == nil {
			if running[task.ID] {
				twice++
			}
			running[task.ID] = true
		} else {
			delete(running, task.ID)
		}
	}
	stop := make(chan struct{})
	var killed atomic.Int64
	var killer sync.WaitGroup
	killer.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Duration(50+rand.IntN(100)) * time.Millisecond):
			}
			if victims := helperChildren(t, "HELPER_POOL="+t.Name()); len(victims) > 0 {
				_ = syscall.Kill(victims[rand.IntN(len(victims))], syscall.SIGKILL)
				killed.Add(1)
			}
		}
	})
	var wg sync.WaitGroup
	var next, lost, ok int64
	var cmu sync.Mutex
	for range 16 {
		wg.Go(func() {
			for {
				cmu.Lock()
				i := next
				next++
				cmu.Unlock()
				// Tasks go on until 5 kills happened (the pool may run
				// 10,000 in less time than that takes), at most 100 × as
				// many.
				if i >= tasks && (killed.Load() >= 5 || i >= 100*tasks) {
					return
				}
				task := task("payload-" + strconv.FormatInt(i, 10))
				task.ID = "t-" + strconv.FormatInt(i, 10)
				res := p.Run(t.Context(), task)
				cmu.Lock()
				if res.Status == model.StatusOK && string(res.Output) == "payload-"+strconv.FormatInt(i, 10) {
					ok++
				} else {
					lost++
					if lost < 5 {
						t.Errorf("task %d = %s %q after %d attempts (%v)", i, res.Status, res.Output, res.Attempts, res.Err)
					}
				}
				cmu.Unlock()
			}
		})
	}
	wg.Wait()
	close(stop)
	killer.Wait()
	if ran := ok + lost; ran < tasks || lost != 0 || twice != 0 {
		t.Errorf("%d tasks: %d ok, %d lost, %d run by two children at once; want at least %d, all ok, none twice", ran, ok, lost, twice, tasks)
	}
	if killed.Load() < 5 {
		t.Errorf("only %d children were killed; the test did not exercise restarts", killed.Load())
	}
	t.Logf("%d tasks ok with %d children killed", ok, killed.Load())
}

// lockedWriter serialises writes to w.
type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// helperChildren are the pids of this process's exec-helper children
// whose environment holds mark, busy or idle, from procfs.
func helperChildren(t *testing.T, mark string) []int {
	t.Helper()
	dirs, _ := os.ReadDir("/proc")
	me := os.Getpid()
	var pids []int
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + d.Name() + "/stat")
		environ, err2 := os.ReadFile("/proc/" + d.Name() + "/environ")
		if err != nil || err2 != nil || !slices.Contains(strings.Split(string(environ), "\x00"), mark) {
			continue
		}
		i := bytes.LastIndexByte(stat, ')')
		f := strings.Fields(string(stat[i+1:]))
		if len(f) > 1 && f[1] == strconv.Itoa(me) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// FuzzParseResult: the one-pass decoding of a result header gives exactly
// what decoding it entry by entry gives (status, echo, annotations,
// labels, cache writes, invalid entries), for any header.
func FuzzParseResult(f *testing.F) {
	f.Add([]byte(`{"type":"result","task_id":"t-1","attempt":1,"status":"ok","annotations":[{"kind":"echo.size","payload":{"attempt":1,"bytes":1024}}]}`))
	f.Add([]byte(`{"type":"result","status":"failed","error":"no","labels":{"a":"b","c":null,"d":5},"cache":[{"key":"k","value":"v","scope":"cluster"},null,7]}`))
	f.Add([]byte(`{"type":"result","status":"retry","annotations":[null,{"kind":"svc.x","payload":1},{"kind":5},"s"],"labels":{"":"x"}}`))
	f.Add([]byte(`{"type":"result","status":"ok","Labels":{"a":"1","a":"2"},"ANNOTATIONS":[{"Kind":"k","payload":null}]}`))
	f.Fuzz(func(t *testing.T, header []byte) {
		var fast, slow model.AttemptResult
		fe, ferr := parseResult(header, &fast)
		se, serr := echo{}, error(nil)
		if h, err := decodeByEntry(header); err != nil {
			serr = err
		} else {
			se, serr = applyResult(&h, &slow)
		}
		if (ferr == nil) != (serr == nil) || fe != se {
			t.Fatalf("one pass: %v %+v; entry by entry: %v %+v", ferr, fe, serr, se)
		}
		if ferr != nil {
			return
		}
		if fast.Err != nil && slow.Err != nil && fast.Err.Error() == slow.Err.Error() {
			fast.Err, slow.Err = nil, nil
		}
		if !reflect.DeepEqual(fast, slow) {
			t.Fatalf("one pass:\n%+v\nentry by entry:\n%+v", fast, slow)
		}
	})
}

// TestTaskFrameHeader: the task frame's header is the line
// docs/executor.md shows (keys in order, maps sorted, HTML characters and
// invalid UTF-8 escaped as encoding/json escapes them, absent labels and
// env as {}, no key as null), then the input, after whatever the buffer
// held.
func TestTaskFrameHeader(t *testing.T) {
	msg := &model.Message{Source: model.SourceKafka, Alias: "source", Partition: 3, Offset: 1 << 40, Key: []byte("k<1>&\"\\")}
	for _, c := range []struct {
		task *model.Task
		want string
	}{
		{&model.Task{ID: "t-1", Input: []byte("hello")},
			`{"type":"task","task_id":"t-1","attempt":2,"source":"","topic_alias":"","partition":0,"offset":0,"key":null,"key_encoding":null,"labels":{},"env":{}}`},
		{&model.Task{ID: "t-2", Msg: msg, Input: []byte("x\ny"), Labels: map[string]string{"b": "2", "a": "1 <&>"}, Env: map[string]string{"Z": "z", "A": "\u2028\x01"}},
			`{"type":"task","task_id":"t-2","attempt":2,"source":"kafka","topic_alias":"source","partition":3,"offset":1099511627776,"key":"k\u003c1\u003e\u0026\"\\","key_encoding":"utf-8","labels":{"a":"1 \u003c\u0026\u003e","b":"2"},"env":{"A":"\u2028\u0001","Z":"z"}}`},
		{&model.Task{ID: "t-\xff", Msg: &model.Message{Source: model.SourceHTTP, Partition: -1, Offset: -1, Key: []byte{0xff, 0}}},
			`{"type":"task","task_id":"t-\ufffd","attempt":2,"source":"http","topic_alias":"","partition":-1,"offset":-1,"key":"/wA=","key_encoding":"base64","labels":{},"env":{}}`},
		{&model.Task{ID: "", Msg: &model.Message{Key: []byte{}}},
			`{"type":"task","task_id":"","attempt":2,"source":"","topic_alias":"","partition":0,"offset":0,"key":"","key_encoding":"utf-8","labels":{},"env":{}}`},
	} {
		want := binary.BigEndian.AppendUint32([]byte("prefix"), uint32(len(c.want)+1+len(c.task.Input)))
		want = append(append(append(want, c.want...), '\n'), c.task.Input...)
		got, err := encodeTask([]byte("prefix"), c.task, 2)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("task %q:\n got %q\nwant %q", c.task.ID, got, want)
		}
	}
}
