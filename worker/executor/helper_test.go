package executor

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"svc/worker/model"
	"svc/worker/workertest"
)

// The test binary doubles as an executor speaking both protocols: run as
// `<test binary> exec-helper`, it serves one task (mode spawn) or a frame
// loop (SVC_EXECUTOR_MODE=persistent). What it does is read from the task
// input: a first word starting with '!' is a command, anything else is
// echoed. Start-up behaviour comes from HELPER_* variables (executor.env).
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "exec-helper" {
		os.Exit(helperMain())
	}
	if len(os.Args) > 1 && os.Args[1] == GuardArg {
		os.Exit(RunGuard(os.Stdin))
	}
	if len(os.Args) > 1 && os.Args[1] == "exec-reaper" {
		os.Exit(reaperMain())
	}
	if len(os.Args) > 3 && os.Args[1] == "exec-worker" {
		os.Exit(workerMain(os.Args[2], os.Args[3]))
	}
	// Most tests wait on children (timeouts, crash loops, readiness):
	// -short runs run more of them at once.
	workertest.ShortParallel(6)
	os.Exit(m.Run())
}

// helperOptions runs the test binary as the executor in mode.
func helperOptions(t *testing.T, mode string) Options {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return Options{Mode: mode, BinaryPath: self, Args: []string{"exec-helper"}, PoolSize: 2, Timeout: 20 * time.Second,
		MaxAttempts: 1, RetryBackoff: time.Millisecond, ReadyTimeout: 20 * time.Second, StopGrace: 2 * time.Second}
}

// helperTask is what the helper knows of its task, in either mode.
type helperTask struct {
	TaskID      string            `json:"task_id"`
	Attempt     int               `json:"attempt"`
	Source      string            `json:"source"`
	TopicAlias  string            `json:"topic_alias"`
	Partition   int32             `json:"partition"`
	Offset      int64             `json:"offset"`
	Key         string            `json:"key"`
	KeyEncoding string            `json:"key_encoding"`
	Labels      map[string]string `json:"labels"`
	Env         map[string]string `json:"env"`
	input       []byte
}

// helperAnswer is the helper's result, written as an exit code and fd 3
// lines (spawn) or a result frame (persistent).
type helperAnswer struct {
	status string // ok, retry, failed
	output []byte
	events []map[string]any // fd 3 lines / result header members
	crash  bool             // die in the middle of the answer
	late   string           // written to stderr after the result (between tasks)
}

func helperMain() int {
	persistent := os.Getenv("SVC_EXECUTOR_MODE") == "persistent"
	if !persistent {
		in, _ := io.ReadAll(os.Stdin)
		t := helperTask{TaskID: os.Getenv("SVC_TASK_ID"), Source: os.Getenv("SVC_SOURCE"), TopicAlias: os.Getenv("SVC_TOPIC_ALIAS"),
			Key: os.Getenv("SVC_KEY"), KeyEncoding: os.Getenv("SVC_KEY_ENCODING"), input: in}
		p, _ := strconv.Atoi(os.Getenv("SVC_PARTITION"))
		t.Partition = int32(p)
		t.Offset, _ = strconv.ParseInt(os.Getenv("SVC_OFFSET"), 10, 64)
		a := helperServe(&t)
		os.Stdout.Write(a.output)
		if fd3 := os.NewFile(3, "events"); fd3 != nil {
			for _, ev := range a.events {
				b, _ := json.Marshal(ev)
				fd3.Write(append(b, '\n'))
			}
		}
		switch {
		case a.crash:
			return 1
		case a.status == "retry":
			return 75
		case a.status == "failed":
			return 3
		}
		return 0
	}
	switch os.Getenv("HELPER_START") {
	case "crash":
		fmt.Fprintln(os.Stderr, "helper: cannot load the model")
		return 1
	case "never-ready":
		time.Sleep(time.Hour)
	case "garbage":
		os.Stdout.WriteString("hello, I speak protocol v1\n")
		time.Sleep(time.Hour)
	}
	r, w := bufio.NewReader(os.Stdin), bufio.NewWriter(os.Stdout)
	helperWriteFrame(w, map[string]any{"type": "ready"}, nil)
	if os.Getenv("HELPER_UNSOLICITED") == "always" || helperOnce("HELPER_UNSOLICITED_ONCE") {
		// A result frame nobody asked for, with the ready frame.
		helperWriteFrame(w, map[string]any{"type": "result", "status": "ok"}, []byte("UNSOLICITED"))
	}
	w.Flush()
	// HELPER_STRAY: what the child writes to stdout besides its results.
	// HELPER_ECHO=0: results name no task (task_id, attempt).
	stray, echo := os.Getenv("HELPER_STRAY"), os.Getenv("HELPER_ECHO") != "0"
	var prev *helperTask
	for {
		var lb [4]byte
		if _, err := io.ReadFull(r, lb[:]); err != nil {
			return 0 // EOF: the pool is done with this child
		}
		buf := make([]byte, binary.BigEndian.Uint32(lb[:]))
		if _, err := io.ReadFull(r, buf); err != nil {
			return 2
		}
		i := strings.IndexByte(string(buf), '\n')
		var t helperTask
		if err := json.Unmarshal(buf[:i], &t); err != nil {
			return 2
		}
		t.input = buf[i+1:]
		if d, _ := time.ParseDuration(os.Getenv("HELPER_SERVE_DELAY")); d > 0 {
			time.Sleep(d) // each task takes d
		}
		a := helperServe(&t)
		if a.status == "garbage" {
			w.WriteString("this is not a frame\n")
			w.Flush()
			continue
		}
		h := map[string]any{"type": "result", "status": a.status}
		for _, ev := range a.events {
			for k, v := range ev {
				switch k {
				case "labels":
					if h["labels"] == nil {
						h["labels"] = map[string]any{}
					}
					for lk, lv := range v.(map[string]any) {
						h["labels"].(map[string]any)[lk] = lv
					}
				case "annotation":
					h["annotations"] = append(helperList(h["annotations"]), v)
				case "cache":
					h["cache"] = append(helperList(h["cache"]), v)
				}
			}
		}
		if a.crash {
			b, _ := json.Marshal(h)
			binary.Write(w, binary.BigEndian, uint32(len(b)+1+len(a.output)+100))
			w.Write(b)
			w.Flush()
			return 1
		}
		if echo {
			h["task_id"], h["attempt"] = t.TaskID, t.Attempt
		}
		if strings.HasPrefix(stray, "stale-late") && prev != nil {
			// The previous task's result again, once this task was read;
			// stale-late-anon leaves its task out.
			stale := map[string]any{"type": "result", "status": "ok", "task_id": prev.TaskID, "attempt": prev.Attempt}
			if stray == "stale-late-anon" {
				stale = map[string]any{"type": "result", "status": "ok"}
			}
			helperFrame(w, stale, append([]byte("STALE-"), prev.input...))
		}
		prev = &t
		helperWriteFrame(w, h, a.output)
		switch stray {
		case "frame": // an extra frame right behind each result
			helperWriteFrame(w, map[string]any{"type": "result", "status": "ok"}, append([]byte("STALE-"), t.input...))
		case "text": // a debug line right behind each result
			w.WriteString("debug: task done\n")
		}
		w.Flush()
		if a.late != "" {
			fmt.Fprint(os.Stderr, a.late)
		}
		if stray == "late" {
			// A second result frame for this task, HELPER_STRAY_DELAY after
			// the first, while the child goes on serving: one write of
			// under PIPE_BUF bytes, so never inside another frame.
			late := map[string]any{"type": "result", "status": "ok"}
			if echo {
				late["task_id"], late["attempt"] = t.TaskID, t.Attempt
			}
			go func(body []byte) {
				time.Sleep(helperDelay())
				var b bytes.Buffer
				lw := bufio.NewWriter(&b)
				helperWriteFrame(lw, late, body)
				lw.Flush()
				os.Stdout.Write(b.Bytes())
			}(append([]byte("STALE-"), t.input...))
		}
		if stray == "text-later" { // a debug line after each result, in a write of its own
			time.Sleep(helperDelay())
			w.WriteString("debug: task done\n")
			w.Flush()
		}
		if os.Getenv("HELPER_EXIT_AFTER_TASK") == "1" {
			return 0
		}
	}
}

func helperList(v any) []any {
	l, _ := v.([]any)
	return l
}

// helperFrame writes one protocol v2 frame and flushes it.
func helperFrame(w *bufio.Writer, header map[string]any, body []byte) {
	helperWriteFrame(w, header, body)
	w.Flush()
}

// helperWriteFrame buffers one protocol v2 frame.
func helperWriteFrame(w *bufio.Writer, header map[string]any, body []byte) {
	b, _ := json.Marshal(header)
	binary.Write(w, binary.BigEndian, uint32(len(b)+1+len(body)))
	w.Write(b)
	w.WriteByte('\n')
	w.Write(body)
}

// helperOnce reports whether the variable names a file this process was
// the first to create: one child of a pool does the odd thing.
func helperOnce(name string) bool {
	path := os.Getenv(name)
	if path == "" {
		return false
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return false
	}
	f.Close()
	return true
}

// helperDelay is HELPER_STRAY_DELAY (0 when unset).
func helperDelay() time.Duration {
	d, _ := time.ParseDuration(os.Getenv("HELPER_STRAY_DELAY"))
	return d
}

// helperServe does what the task input asks.
func helperServe(t *helperTask) helperAnswer {
	in := string(t.input)
	if !strings.HasPrefix(in, "!") {
		return helperAnswer{status: "ok", output: t.input}
	}
	cmd, arg, _ := strings.Cut(in[1:], " ")
	switch cmd {
	case "fail":
		fmt.Fprintln(os.Stderr, "helper: asked to fail")
		return helperAnswer{status: "failed"}
	case "retry":
		return helperAnswer{status: "retry"}
	case "stderr":
		fmt.Fprint(os.Stderr, arg)
		return helperAnswer{status: "ok", output: []byte("said it")}
	case "stderr-late": // arg on stderr once the result is written
		return helperAnswer{status: "ok", output: []byte("will say it"), late: arg}
	case "big":
		n, _ := strconv.Atoi(arg)
		return helperAnswer{status: "ok", output: []byte(strings.Repeat("z", n))}
	case "sleep":
		d, _ := time.ParseDuration(arg)
		time.Sleep(d)
		return helperAnswer{status: "ok", output: []byte("slept")}
	case "hang": // with a grandchild in its process group
		sleep := exec.Command("sleep", "300")
		if sleep.Start() == nil {
			// Whole or not at all: the worker may kill this process any time.
			if os.WriteFile(arg+".tmp", []byte(strconv.Itoa(sleep.Process.Pid)), 0o600) == nil {
				os.Rename(arg+".tmp", arg)
			}
		}
		time.Sleep(time.Hour)
	case "pid":
		return helperAnswer{status: "ok", output: []byte(strconv.Itoa(os.Getpid()))}
	case "view":
		b, _ := json.Marshal(t)
		return helperAnswer{status: "ok", output: b}
	case "crash":
		return helperAnswer{status: "ok", output: []byte("partial"), crash: true}
	case "garbage":
		return helperAnswer{status: "garbage"}
	case "count": // arg: a counter file; retry until the third attempt
		b, _ := os.ReadFile(arg)
		n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		n++
		os.WriteFile(arg, []byte(strconv.Itoa(n)), 0o600)
		fmt.Fprintf(os.Stderr, "attempt %d\n", n)
		a := helperAnswer{status: "retry", events: []map[string]any{
			{"annotation": map[string]any{"kind": "attempt", "payload": map[string]any{"n": n}}},
			{"labels": map[string]any{"attempt": strconv.Itoa(n), "region": "from-executor"}},
		}}
		if n > 2 {
			a.status, a.output = "ok", []byte("done\n")
			a.events = append(a.events, map[string]any{"cache": map[string]any{"key": "seen", "value": strconv.Itoa(n), "scope": "cluster"}})
		}
		return a
	case "events":
		return helperAnswer{status: "ok", output: []byte("with events"), events: []map[string]any{
			{"annotation": map[string]any{"kind": "progress", "payload": map[string]any{"pct": 50}}},
			{"annotation": map[string]any{"kind": "svc.forged", "payload": map[string]any{}}},
			{"labels": map[string]any{"customer": "c1"}},
			{"cache": map[string]any{"key": "k1", "value": "v1", "scope": "cluster"}},
			{"cache": map[string]any{"key": "k2", "value": "v2", "scope": "planet"}},
		}}
	}
	return helperAnswer{status: "failed", output: []byte("unknown command " + cmd)}
}

// workerMain is the test binary run as a worker: it starts one task in
// a pool of the given mode (its executor leaves a grandchild) and blocks
// until it is killed.
func workerMain(mode, dir string) int {
	self, _ := os.Executable()
	opts := Options{Mode: mode, BinaryPath: self, Args: []string{"exec-helper"}, PoolSize: 1, Timeout: time.Hour,
		MaxAttempts: 1, GuardBinary: self}
	p, err := NewPool(opts)
	if err != nil {
		return 2
	}
	p.Run(context.Background(), &model.Task{ID: "t", Input: []byte("!hang " + filepath.Join(dir, "grandchild.pid"))})
	return 0
}

// anns decodes annotations for comparisons.
func anns(as []model.Annotation) []workertest.Ann {
	var out []workertest.Ann
	for _, a := range as {
		out = append(out, workertest.Ann{Kind: a.Kind, Payload: a.Fields()})
	}
	return out
}
