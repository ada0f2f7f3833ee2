package executor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"svc/worker"
	"svc/worker/payload"
)

// ErrOutputTooLarge is wrapped by an attempt's error when the executor wrote
// more than executor.max_output_bytes to stdout.
var ErrOutputTooLarge = errors.New("output exceeds executor.max_output_bytes")

// defaultPath is the child's PATH when the worker has none.
const defaultPath = "/usr/local/bin:/usr/bin:/bin"

// Spawner runs one attempt of a task as one child process (executor
// protocol v1, mode spawn). It does not bound concurrency (Pool
// does) and Spawn is safe for concurrent use.
//
// The child runs in its own process group and, on Linux, is killed when
// the worker dies (parent-death signal). On timeout, ctx end or output
// overflow the whole group gets SIGKILL, and so does whatever is left of it
// once the leader exited, so grandchildren never outlive their attempt or
// hold its pipes open. A descendant that left the group (setsid) is given
// a second to close the pipes before they are abandoned.
//
// The child's environment is minimal: PATH (a default when the worker has
// none), HOME, USER, LANG, LC_ALL, LC_CTYPE, TZ and TMPDIR from the worker,
// then executor.env, the task's Env, and the protocol's SVC_* variables,
// later ones winning.
type Spawner struct {
	opts    Options
	argv    []string
	baseEnv []string // inherited base + executor.env, built once
	// persistentEnv is a persistent child's whole environment.
	persistentEnv []string
	guard         *guard
	log           *slog.Logger
}

// NewSpawner validates opts (filling defaults) and returns a Spawner.
func NewSpawner(opts Options) (*Spawner, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	s := &Spawner{opts: opts, log: opts.Logger, guard: &guard{bin: opts.GuardBinary}}
	s.argv = append([]string{opts.BinaryPath}, opts.Args...)
	// These are the only variables a child inherits from the worker: its
	// environment may hold secrets (tokens, Kafka passwords), so nothing
	// else leaks. Operators pass what an executor needs with executor.env,
	// whose values may expand ${VAR}.
	for _, k := range []string{"PATH", "HOME", "USER", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR"} {
		if v, ok := os.LookupEnv(k); ok && envOK(k, v) {
			s.baseEnv = append(s.baseEnv, k+"="+v)
		} else if k == "PATH" {
			s.baseEnv = append(s.baseEnv, "PATH="+defaultPath)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(opts.Env)) {
		s.baseEnv = append(s.baseEnv, k+"="+opts.Env[k])
	}
	s.persistentEnv = append(slices.Clip(s.baseEnv), "SVC_EXECUTOR_MODE=persistent")
	return s, nil
}

// binary resolves the executor path; a bare name is looked up in the
// worker's PATH on every attempt so that installing it later works.
func (s *Spawner) binary() (string, error) {
	if strings.Contains(s.opts.BinaryPath, "/") {
		return s.opts.BinaryPath, nil
	}
	return exec.LookPath(s.opts.BinaryPath)
}

// env is the child's environment. Later entries win (os/exec keeps the last
// of duplicate keys): base, executor.env, task env, then the protocol's SVC_*
// variables, so an executor can trust them.
func (s *Spawner) env(t *worker.Task, attempt int) []string {
	env := make([]string, 0, len(s.baseEnv)+len(t.Env)+len(t.Labels)+10)
	env = append(env, s.baseEnv...)
	add := func(k, v string) {
		if envOK(k, v) {
			env = append(env, k+"="+v)
		}
	}
	// The kernel refuses a single environment string over 128 KiB
	// ("argument list too long"): a value over envValueMax is cut, and
	// for the message key the original length is passed along.
	cut := func(v string) string {
		if len(v) > envValueMax {
			return v[:envValueMax]
		}
		return v
	}
	for k, v := range t.Env {
		add(k, cut(v))
	}
	add("SVC_TASK_ID", t.ID)
	add("SVC_ATTEMPT", strconv.Itoa(attempt))
	add("SVC_EVENTS_FD", "3")
	if m := t.Msg; m != nil {
		add("SVC_SOURCE", m.Source)
		add("SVC_TOPIC_ALIAS", m.Alias)
		add("SVC_PARTITION", strconv.FormatInt(int64(m.Partition), 10))
		add("SVC_OFFSET", strconv.FormatInt(m.Offset, 10))
		if m.Key != nil { // no key: SVC_KEY and SVC_KEY_ENCODING stay unset
			key, enc := payload.EncodeEnv(m.Key)
			add(worker.KeyEncodingEnv, enc)
			if len(key) > envValueMax {
				add("SVC_KEY_TRUNCATED", strconv.Itoa(len(key)))
			}
			add("SVC_KEY", cut(key))
		}
	}
	// Sorted so that two labels mapping to one variable resolve the same
	// way every time (the later name wins).
	for _, name := range slices.Sorted(maps.Keys(t.Labels)) {
		if v := labelVar(name); v != "" {
			add("SVC_LABEL_"+v, cut(t.Labels[name]))
		}
	}
	return env
}

// envValueMax caps one environment value of a spawned executor.
const envValueMax = 32 << 10

// labelVar upper-cases a label name and maps every rune outside
// [A-Z0-9_] to '_'.
func labelVar(name string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z':
			return r - 'a' + 'A'
		case r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_':
			return r
		}
		return '_'
	}, name)
}

// failed is the result of an attempt that never got a process.
func failed(err error) worker.AttemptResult {
	return worker.AttemptResult{Status: worker.StatusFailed, ExitCode: -1, Err: err}
}

// Spawn runs t as its first attempt; see SpawnAttempt.
func (s *Spawner) Spawn(ctx context.Context, t *worker.Task) worker.AttemptResult {
	return s.SpawnAttempt(ctx, t, 1)
}

// SpawnAttempt runs attempt n (from 1, SVC_ATTEMPT) of t. It never panics
// on executor misbehaviour; every problem ends up in the result.
func (s *Spawner) SpawnAttempt(ctx context.Context, t *worker.Task, n int) worker.AttemptResult {
	start := time.Now()
	res := s.spawn(ctx, t, n, nil)
	res.Duration = time.Since(start)
	return res
}

// ioGrace bounds how long a descendant that left the process group may
// keep an attempt's pipes open after the leader exited.
const ioGrace = time.Second

// Why an attempt's process group was killed; the first reason wins.
const (
	stopTimeout int32 = iota + 1
	stopCanceled
	stopOverflow
)

// spawn runs the attempt; onStart (optional) is called once the process
// started. A result whose Err wraps ErrStart means no process started.
func (s *Spawner) spawn(ctx context.Context, t *worker.Task, attempt int, onStart func()) worker.AttemptResult {
	if err := ctx.Err(); err != nil {
		return failed(fmt.Errorf("run executor: %w", err))
	}
	bin, err := s.binary()
	if err != nil {
		return failed(startError(s.opts.BinaryPath, err))
	}
	var pp pipes
	if err := pp.open(4); err != nil {
		return failed(fmt.Errorf("start executor: %w", err))
	}
	cmd := &exec.Cmd{
		Path: bin, Args: s.argv, Env: s.env(t, attempt),
		Stdin: pp.child[0], Stdout: pp.child[1], Stderr: pp.child[2],
		ExtraFiles:  pp.child[3:], // fd 3, SVC_EVENTS_FD
		SysProcAttr: sysProcAttr(),
	}
	cmd, err = start(cmd, startCmd)
	pp.closeChild()
	if err != nil {
		pp.closeParent()
		return failed(startError(s.opts.BinaryPath, err))
	}
	pgid := cmd.Process.Pid
	s.guard.note('+', pgid)
	if onStart != nil {
		onStart()
	}
	var why atomic.Int32
	stop := func(reason int32) {
		if why.CompareAndSwap(0, reason) {
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			// The leader too, in case it moved itself to another group.
			_ = cmd.Process.Kill()
		}
	}
	timer := time.AfterFunc(s.opts.Timeout, func() { stop(stopTimeout) })
	unwatch := context.AfterFunc(ctx, func() { stop(stopCanceled) })

	var (
		wg       sync.WaitGroup
		out      []byte
		overflow bool
		stderr   = tail{max: s.opts.StderrTail}
		events   events
	)
	wg.Add(3)
	go func() {
		defer wg.Done()
		// Over the cap the group is killed at once: the attempt has failed
		// anyway and a runaway writer should not burn CPU until the timeout.
		out, overflow = readCapped(pp.parent[1], s.opts.MaxOutputBytes, func() { stop(stopOverflow) })
	}()
	go func() { defer wg.Done(); stderr.readFrom(pp.parent[2]) }()
	go func() { defer wg.Done(); events.readFrom(pp.parent[3]) }()
	if len(t.Input) > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// EPIPE means the executor exited or closed stdin without
			// reading it all; its exit status decides the attempt.
			_, _ = pp.parent[0].Write(t.Input)
			_ = pp.parent[0].Close()
		}()
	} else {
		_ = pp.parent[0].Close()
	}

	waitErr := cmd.Wait()
	waited(pgid)
	timer.Stop()
	unwatch()
	// The leader is gone: what is left of its group dies now rather than
	// holding stdout or fd 3 open. The pgid cannot have been reused while a
	// member is alive, and with none alive the kill finds nobody.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	s.guard.note('-', pgid)
	var abandoned atomic.Bool
	grace := time.AfterFunc(ioGrace, func() { abandoned.Store(true); pp.expire() })
	wg.Wait()
	grace.Stop()
	pp.closeParent()
	if abandoned.Load() {
		s.log.Warn("executor_io_abandoned", "task_id", t.ID, "pid", pgid,
			"detail", "a descendant outside the process group kept the executor's pipes open")
	}

	res := worker.AttemptResult{Output: out, OutputTruncated: overflow, Stderr: stderr.bytes(), ExitCode: -1}
	res.Annotations, res.Labels, res.CacheWrites, res.InvalidEvents = events.result()
	st := cmd.ProcessState
	if st != nil {
		res.ExitCode = st.ExitCode()
	}
	reason := why.Load()
	if reason != stopOverflow && st != nil && st.Exited() {
		reason = 0 // the leader exited by itself before the kill landed
	}
	switch reason {
	case stopTimeout:
		res.Status, res.Err = worker.StatusTimeout, fmt.Errorf("executor timed out after %s (executor.timeout)", s.opts.Timeout)
	case stopCanceled:
		res.Status, res.Err = worker.StatusFailed, fmt.Errorf("run executor: %w", ctx.Err())
	case stopOverflow:
		res.Status, res.Err = worker.StatusFailed, fmt.Errorf("%w (%d)", ErrOutputTooLarge, s.opts.MaxOutputBytes)
	default:
		res.Status, res.Err = exitStatus(st, waitErr)
	}
	return res
}

// exitStatus maps how the leader ended to a status: 0 ok, 75 tempfail,
// anything else failed.
func exitStatus(st *os.ProcessState, waitErr error) (string, error) {
	if st == nil {
		return worker.StatusFailed, fmt.Errorf("wait for executor: %w", waitErr)
	}
	switch code := st.ExitCode(); {
	case code == 0:
		return worker.StatusOK, nil
	case code == 75:
		return worker.StatusTempFail, errors.New("executor exited with code 75 (EX_TEMPFAIL)")
	case code > 0:
		return worker.StatusFailed, fmt.Errorf("executor exited with code %d", code)
	}
	return worker.StatusFailed, fmt.Errorf("executor terminated: %s", st)
}

// pipes are an attempt's stdin, stdout, stderr and fd 3 pipes: child
// ends are handed to the process, parent ends are read (or, for stdin,
// written) by the worker. Only parent ends are non-blocking and registered
// with the poller (so deadlines work); child ends skip that round trip,
// which os.Pipe would make and os/exec undo.
type pipes struct {
	parent, child [4]*os.File
}

// set stores pipe i (read end fds[0], write end fds[1]); the worker's end
// goes non-blocking so that it works with the poller and deadlines.
func (p *pipes) set(i int, fds [2]int) {
	parent, child := fds[0], fds[1]
	if i == 0 { // stdin: the child reads
		parent, child = child, parent
	}
	// A pipe fd is always able to go non-blocking; should it fail, the
	// file is merely blocking (no deadlines), not broken.
	_ = syscall.SetNonblock(parent, true)
	p.parent[i] = os.NewFile(uintptr(parent), "|executor")
	p.child[i] = os.NewFile(uintptr(child), "|executor-child")
}

func (p *pipes) closeChild()  { closeAll(p.child[:]) }
func (p *pipes) closeParent() { closeAll(p.parent[:]) }

// expire makes pending reads and the stdin write return now.
func (p *pipes) expire() {
	now := time.Now()
	_ = p.parent[0].SetWriteDeadline(now)
	for _, f := range p.parent[1:] {
		if f != nil {
			_ = f.SetReadDeadline(now)
		}
	}
}

func closeAll(files []*os.File) {
	for _, f := range files {
		if f != nil {
			_ = f.Close()
		}
	}
}
