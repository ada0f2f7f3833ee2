package executor

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"testing/iotest"
	"time"

	"svc/worker/model"
)

// script writes a /bin/sh executor into a fresh temp dir.
func script(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "executor.sh")
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// testOptions are small, fast settings; tests override what they probe.
func testOptions(bin string) Options {
	return Options{BinaryPath: bin, PoolSize: 2, Timeout: 20 * time.Second, MaxAttempts: 1, RetryBackoff: time.Millisecond}
}

func task(input string) *model.Task {
	return &model.Task{ID: "t-1", Input: []byte(input), Msg: &model.Message{
		Source: model.SourceKafka, Alias: "orders", Partition: 2, Offset: 42, Key: []byte("k1"),
	}}
}

func spawn(t *testing.T, opts Options, task *model.Task) model.AttemptResult {
	t.Helper()
	s, err := NewSpawner(opts)
	if err != nil {
		t.Fatalf("NewSpawner: %v", err)
	}
	start := time.Now()
	res := s.spawn(t.Context(), task, 1, nil)
	res.Duration = time.Since(start)
	return res
}

// waitGone fails t unless pid is gone (or a zombie) within 5 s.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	gone := func() bool {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			return true
		}
		// A killed grandchild stays a zombie until its new parent reaps it.
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		i := bytes.LastIndexByte(b, ')')
		return err != nil || (i > 0 && i+2 < len(b) && (b[i+2] == 'Z' || b[i+2] == 'X'))
	}
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if gone() {
			return
		}
	}
	t.Errorf("process %d still alive", pid)
}

// readPid reads the pid a script wrote to path.
func readPid(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read pid file: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("pid file %q: %v", b, err)
	}
	return pid
}

func TestSpawnCatEchoesInput(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789abcdef"), 16<<10) // 256 KiB, several pipe buffers
	for _, tc := range []struct {
		name  string
		input []byte
	}{
		{"empty", nil},
		{"line", []byte("hello executor\n")},
		{"binary", []byte{0, 1, 2, 0xff, '\n', 0}},
		{"256KiB", big},
	} {
		t.Run(tc.name, func(t *testing.T) {
			task := task("")
			task.Input = tc.input
			res := spawn(t, testOptions("cat"), task)
			if res.Status != model.StatusOK || res.Err != nil || res.ExitCode != 0 {
				t.Fatalf("Spawn(cat) = %s, %v, exit %d, want ok", res.Status, res.Err, res.ExitCode)
			}
			if !bytes.Equal(res.Output, tc.input) {
				t.Errorf("Spawn(cat) output = %d bytes, want the %d input bytes", len(res.Output), len(tc.input))
			}
		})
	}
}

func TestSpawnEnvironment(t *testing.T) {
	t.Setenv("SVC_TEST_SECRET", "hunter2")
	bin := script(t, "env")
	for _, tc := range []struct {
		name    string
		key     []byte
		wantKey string
		wantEnc string
	}{
		{"utf8 key", []byte("k1"), "k1", "utf-8"},
		{"empty key", []byte{}, "", "utf-8"},
		{"binary key", []byte{0xff, 0x00, 0x01}, "/wAB", "base64"},
		{"NUL in key", []byte("a\x00b"), "YQBi", "base64"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := testOptions(bin)
			opts.Env = map[string]string{"EXEC_VAR": "ev"}
			task := task("")
			task.Msg.Key = tc.key
			task.Env = map[string]string{"TASK_VAR": "tv", "SVC_TASK_ID": "forged", "BAD=NAME": "x"}
			task.Labels = map[string]string{"tenant-id": "acme", "Region": "eu", "ünï": "u", "nul": "a\x00b"}
			res := spawn(t, opts, task)
			if res.Status != model.StatusOK {
				t.Fatalf("Spawn(env) = %s, %v, want ok", res.Status, res.Err)
			}
			env := map[string]string{}
			for _, line := range strings.Split(strings.TrimSpace(string(res.Output)), "\n") {
				k, v, _ := strings.Cut(line, "=")
				env[k] = v
			}
			want := map[string]string{
				"SVC_TASK_ID": "t-1", "SVC_SOURCE": "kafka", "SVC_TOPIC_ALIAS": "orders",
				"SVC_PARTITION": "2", "SVC_OFFSET": "42", "SVC_EVENTS_FD": "3",
				"SVC_KEY": tc.wantKey, "SVC_KEY_ENCODING": tc.wantEnc,
				"SVC_LABEL_TENANT_ID": "acme", "SVC_LABEL_REGION": "eu", "SVC_LABEL__N_": "u",
				"EXEC_VAR": "ev", "TASK_VAR": "tv",
			}
			for k, v := range want {
				if got, ok := env[k]; !ok || got != v {
					t.Errorf("env %s = %q (set %v), want %q", k, got, ok, v)
				}
			}
			unset := []string{"SVC_TEST_SECRET", "SVC_LABEL_NUL", "BAD"}
			for _, k := range unset {
				if v, ok := env[k]; ok {
					t.Errorf("env %s = %q, want unset", k, v)
				}
			}
			if env["PATH"] == "" {
				t.Errorf("env PATH is empty, want the worker's PATH")
			}
		})
	}
}

func TestSpawnExitStatus(t *testing.T) {
	for _, tc := range []struct {
		name, script string
		status       string
		exit         int
		errText      string
		stderr       string
	}{
		{"ok", "exit 0", model.StatusOK, 0, "", ""},
		{"failed", "echo boom >&2; exit 3", model.StatusFailed, 3, "executor exited with code 3", "boom\n"},
		{"tempfail", "exit 75", model.StatusTempFail, 75, "code 75", ""},
		{"signal", "kill -9 $$", model.StatusFailed, -1, "signal: killed", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := spawn(t, testOptions(script(t, tc.script)), task("in"))
			if res.Status != tc.status || res.ExitCode != tc.exit {
				t.Errorf("Spawn = %s exit %d, want %s exit %d", res.Status, res.ExitCode, tc.status, tc.exit)
			}
			if (res.Err == nil) != (tc.errText == "") || (res.Err != nil && !strings.Contains(res.Err.Error(), tc.errText)) {
				t.Errorf("Spawn error = %v, want one containing %q", res.Err, tc.errText)
			}
			if string(res.Stderr) != tc.stderr {
				t.Errorf("Spawn stderr = %q, want %q", res.Stderr, tc.stderr)
			}
		})
	}
}

func TestSpawnStderrKeepsTail(t *testing.T) {
	bin := script(t, `head -c 20000 /dev/zero | tr '\0' a >&2; printf END >&2; exit 3`)
	for _, tc := range []struct {
		name string
		tail int
		want int
	}{
		{"default 8 KiB", 0, 8 << 10},
		{"custom", 100, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := testOptions(bin)
			opts.StderrTail = tc.tail
			res := spawn(t, opts, task(""))
			if res.Status != model.StatusFailed || res.ExitCode != 3 {
				t.Errorf("Spawn = %s exit %d, want failed exit 3", res.Status, res.ExitCode)
			}
			want := strings.Repeat("a", tc.want-3) + "END"
			if string(res.Stderr) != want {
				t.Errorf("Spawn stderr = %d bytes ending %q, want the last %d bytes", len(res.Stderr), res.Stderr[max(0, len(res.Stderr)-5):], tc.want)
			}
		})
	}
}

func TestSpawnIgnoresStdin(t *testing.T) {
	t.Parallel()
	input := strings.Repeat("x", 1<<20)
	for _, tc := range []struct{ name, script string }{
		{"exits at once", "echo ok"},
		{"exits later", "sleep 0.2; echo ok"},
		{"closes stdin", "exec 0<&-; sleep 0.1; echo ok"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := spawn(t, testOptions(script(t, tc.script)), task(input))
			if res.Status != model.StatusOK || string(res.Output) != "ok\n" {
				t.Errorf("Spawn = %s %q (%v), want ok %q", res.Status, res.Output, res.Err, "ok\n")
			}
		})
	}
}

func TestSpawnOutputCap(t *testing.T) {
	for _, tc := range []struct {
		name, script string
		status       string
	}{
		{"at the cap", "head -c 1000 /dev/zero", model.StatusOK},
		{"one over", "head -c 1001 /dev/zero", model.StatusFailed},
		{"endless", "yes", model.StatusFailed},
		{"endless from a grandchild", "yes & wait", model.StatusFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := testOptions(script(t, tc.script))
			opts.MaxOutputBytes = 1000
			res := spawn(t, opts, task(""))
			if res.Status != tc.status || len(res.Output) != 1000 {
				t.Fatalf("Spawn = %s with %d bytes (%v), want %s with 1000", res.Status, len(res.Output), res.Err, tc.status)
			}
			if tc.status == model.StatusOK {
				return
			}
			if !res.OutputTruncated || !errors.Is(res.Err, ErrOutputTooLarge) {
				t.Errorf("Spawn truncated %v, error %v, want true and ErrOutputTooLarge", res.OutputTruncated, res.Err)
			}
			if got, want := res.Err.Error(), "output exceeds executor.max_output_bytes (1000)"; got != want {
				t.Errorf("Spawn error = %q, want %q", got, want)
			}
			if res.Duration > opts.Timeout/2 {
				t.Errorf("Spawn took %s, want the writer killed long before the %s timeout", res.Duration, opts.Timeout)
			}
		})
	}
}

func TestSpawnTimeoutKillsProcessGroup(t *testing.T) {
	t.Parallel()
	pidFile := filepath.Join(t.TempDir(), "grandchild.pid")
	script := script(t, `sleep 300 & echo $! > "$PIDFILE.tmp" && mv "$PIDFILE.tmp" "$PIDFILE"; sleep 300`)
	// A loaded machine can take longer than the timeout to start the
	// script, and then no grandchild exists to check: try a longer one.
	for timeout := 300 * time.Millisecond; ; timeout *= 4 {
		opts := testOptions(script)
		opts.Env = map[string]string{"PIDFILE": pidFile}
		opts.Timeout = timeout
		res := spawn(t, opts, task(""))
		if res.Status != model.StatusTimeout || res.ExitCode != -1 {
			t.Errorf("Spawn = %s exit %d, want timeout exit -1", res.Status, res.ExitCode)
		}
		if res.Err == nil || !strings.Contains(res.Err.Error(), "executor.timeout") {
			t.Errorf("Spawn error = %v, want one naming executor.timeout", res.Err)
		}
		if res.Duration > timeout+10*time.Second {
			t.Errorf("Spawn took %s, want about the %s timeout", res.Duration, timeout)
		}
		if _, err := os.Stat(pidFile); err == nil || timeout >= 5*time.Second {
			break
		}
	}
	waitGone(t, readPid(t, pidFile))
}

func TestSpawnLeftoverGrandchildIsKilled(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "grandchild.pid")
	opts := testOptions(script(t, `sleep 300 & echo $! > "$PIDFILE"; echo done`))
	opts.Env = map[string]string{"PIDFILE": pidFile}
	res := spawn(t, opts, task(""))
	if res.Status != model.StatusOK || string(res.Output) != "done\n" {
		t.Errorf("Spawn = %s %q (%v), want ok %q", res.Status, res.Output, res.Err, "done\n")
	}
	if res.Duration >= ioGrace {
		t.Errorf("Spawn took %s, want no wait for the grandchild holding stdout", res.Duration)
	}
	waitGone(t, readPid(t, pidFile))
}

func TestSpawnEscapedDescendantDoesNotBlock(t *testing.T) {
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Skip("setsid not installed")
	}
	pidFile := filepath.Join(t.TempDir(), "escaped.pid")
	opts := testOptions(script(t, `setsid sleep 60 & echo $! > "$PIDFILE"; echo done`))
	opts.Env = map[string]string{"PIDFILE": pidFile}
	res := spawn(t, opts, task(""))
	if pid := readPid(t, pidFile); pid > 0 {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	if res.Status != model.StatusOK || string(res.Output) != "done\n" {
		t.Errorf("Spawn = %s %q (%v), want ok %q", res.Status, res.Output, res.Err, "done\n")
	}
	if res.Duration > 30*time.Second {
		t.Errorf("Spawn took %s, want the pipes abandoned after %s", res.Duration, ioGrace)
	}
}

// parseEvents runs the fd 3 reader over data, whole or a byte at a time.
func parseEvents(data []byte, oneByte bool) events {
	var r io.Reader = bytes.NewReader(data)
	if oneByte {
		r = iotest.OneByteReader(r)
	}
	var e events
	e.readFrom(r)
	return e
}

func TestExecutorEventsParse(t *testing.T) {
	long := `{"labels":{"x":"` + strings.Repeat("y", eventLineMax) + `"}}`
	for _, tc := range []struct {
		name        string
		in          string
		annotations int
		labels      map[string]string
		cache       []model.CacheWrite
		malformed   int
		tooLong     int
	}{
		{name: "empty"},
		{name: "blank lines", in: "\n \r\n\t\n"},
		{name: "annotation", in: `{"annotation":{"kind":"k","payload":{"a":1}}}`, annotations: 1},
		{name: "annotation without payload", in: `{"annotation":{"kind":"k"}}`, annotations: 1},
		{name: "labels merge", in: "{\"labels\":{\"a\":\"1\",\"b\":\"2\"}}\r\n{\"labels\":{\"b\":\"3\"}}\n",
			labels: map[string]string{"a": "1", "b": "3"}},
		{name: "cache scopes", in: `{"cache":{"key":"k","value":"v"}}` + "\n" + `{"cache":{"key":"k2","value":"v2","scope":"global"}}`,
			cache: []model.CacheWrite{{Key: "k", Value: "v", Scope: "local"}, {Key: "k2", Value: "v2", Scope: "global"}}},
		{name: "unknown members ignored", in: `{"labels":{"a":"1"},"future":true}`, labels: map[string]string{"a": "1"}},
		{name: "garbage", in: "not json\n[1]\n\"s\"\nnull\n{}\n{\"unknown\":1}\n{\"labels\":{}} x\n", malformed: 7},
		{name: "bad members", in: `{"labels":{"n":1}}` + "\n" + `{"annotation":{"payload":{}}}` + "\n" +
			`{"annotation":{"kind":"svc.fd3_invalid"}}` + "\n" + `{"annotation":{"kind":"k","payload":[1]}}` + "\n" +
			`{"cache":{"key":"","value":"v"}}` + "\n" + `{"cache":{"key":"k","scope":"planet"}}` + "\n" +
			`{"labels":{"a":"1"},"cache":{"key":""}}` + "\n" + `{"labels":{"":"x"}}`, malformed: 8},
		{name: "too long", in: long + "\n" + `{"labels":{"a":"1"}}` + "\n" + long, labels: map[string]string{"a": "1"}, tooLong: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, oneByte := range []bool{false, true} {
				e := parseEvents([]byte(tc.in), oneByte)
				if len(e.annotations) != tc.annotations || !maps.Equal(e.labels, tc.labels) || !slices.Equal(e.cache, tc.cache) {
					t.Errorf("readFrom(oneByte=%v) = %d annotations, labels %v, cache %v; want %d, %v, %v",
						oneByte, len(e.annotations), e.labels, e.cache, tc.annotations, tc.labels, tc.cache)
				}
				if e.malformed != tc.malformed || e.tooLong != tc.tooLong || e.overLimit != 0 {
					t.Errorf("readFrom(oneByte=%v) counts malformed %d, too long %d, over limit %d; want %d, %d, 0",
						oneByte, e.malformed, e.tooLong, e.overLimit, tc.malformed, tc.tooLong)
				}
			}
		})
	}
}

func TestExecutorEventsLimits(t *testing.T) {
	var b strings.Builder
	for i := range eventLinesMax + 5 {
		fmt.Fprintf(&b, "{\"labels\":{\"n\":\"%d\"}}\n", i)
	}
	e := parseEvents([]byte(b.String()), false)
	if e.labels["n"] != strconv.Itoa(eventLinesMax-1) || e.overLimit != 5 {
		t.Errorf("readFrom(%d lines) = label n %q, over limit %d; want %d, 5", eventLinesMax+5, e.labels["n"], e.overLimit, eventLinesMax-1)
	}
	b.Reset()
	line := `{"annotation":{"kind":"k","payload":{"p":"` + strings.Repeat("z", 60<<10) + `"}}}` + "\n"
	for range 20 {
		b.WriteString(line)
	}
	e = parseEvents([]byte(b.String()), false)
	if got, want := len(e.annotations), eventBytesMax/len(line); got != want || e.overLimit != 20-want {
		t.Errorf("readFrom(20 × 60 KiB) = %d annotations, over limit %d; want %d, %d", got, e.overLimit, want, 20-want)
	}
	anns, _, _, invalid := e.result()
	last := anns[len(anns)-1]
	if invalid != 20-len(anns)+1 || last.Kind != InvalidEventsKind || last.Fields()["over_limit"] != float64(invalid) {
		t.Errorf("result() invalid %d, last annotation %+v; want the %s summary", invalid, last, InvalidEventsKind)
	}
}

func FuzzExecutorEvents(f *testing.F) {
	f.Add([]byte(`{"annotation":{"kind":"k","payload":{"a":[1,{"b":null}]}}}` + "\n" + `{"labels":{"a":"b"}}`))
	f.Add([]byte(`{"cache":{"key":"k","value":"v","scope":"cluster"}}` + "\r\n\n{]\n"))
	f.Add([]byte("\xff\xfe\n{\"labels\":{\"\xff\":\"x\"}}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		whole, bytewise := parseEvents(data, false), parseEvents(data, true)
		if !reflect.DeepEqual(whole, bytewise) {
			t.Fatalf("readFrom depends on read sizes: %+v vs %+v", whole, bytewise)
		}
		anns, labels, cache, invalid := whole.result()
		for i, a := range anns {
			if strings.HasPrefix(a.Kind, "svc.") && (i != len(anns)-1 || invalid == 0) {
				t.Errorf("annotation %d has reserved kind %q", i, a.Kind)
			}
			if a.Kind == "" || a.Payload == nil {
				t.Errorf("annotation %d = %+v accepted", i, a)
			}
		}
		if _, ok := labels[""]; ok {
			t.Errorf("label with an empty name accepted")
		}
		for _, c := range cache {
			if c.Key == "" || (c.Scope != "local" && c.Scope != "cluster" && c.Scope != "global") {
				t.Errorf("cache write %+v accepted", c)
			}
		}
	})
}

// TestSpawnHugeKeyAndLabels: a message key or a label over the kernel's
// 128 KiB limit for one environment string used to fail every attempt with
// "argument list too long" blamed on executor.binary_path; the value is now
// cut to 32 KiB and the key's real length is passed along.
func TestSpawnHugeKeyAndLabels(t *testing.T) {
	t.Parallel()
	bin := script(t, `printf '%s %s %s' "${#SVC_KEY}" "$SVC_KEY_TRUNCATED" "${#SVC_LABEL_BIG}"`)
	task := task("")
	task.Msg.Key = []byte(strings.Repeat("k", 200<<10))
	task.Labels = map[string]string{"big": strings.Repeat("v", 150<<10)}
	task.Env = map[string]string{"HUGE": strings.Repeat("e", 300<<10)}
	res := spawn(t, testOptions(bin), task)
	if res.Status != model.StatusOK {
		t.Fatalf("Spawn(huge key) = %s, %v, want ok", res.Status, res.Err)
	}
	if got, want := string(res.Output), fmt.Sprintf("%d %d %d", 32<<10, 200<<10, 32<<10); got != want {
		t.Errorf("key length, key truncated, label length = %q, want %q", got, want)
	}
}

// TestSpawnNullKey: a message without a key leaves SVC_KEY and
// SVC_KEY_ENCODING unset, so an executor tells it from an empty key.
func TestSpawnNullKey(t *testing.T) {
	t.Parallel()
	task := task("")
	task.Msg.Key = nil
	res := spawn(t, testOptions(script(t, `printf '%s|%s' "${SVC_KEY-unset}" "${SVC_KEY_ENCODING-unset}"`)), task)
	if got := string(res.Output); got != "unset|unset" {
		t.Errorf("SVC_KEY|SVC_KEY_ENCODING for a null key = %q, want unset|unset", got)
	}
}
