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

	"svc/worker/model"
	"svc/worker/payload"
)

// ErrOutputTooLarge is wrapped by an attempt's error when the executor wrote
// more than executor.max_output_bytes to stdout.
var ErrOutputTooLarge = errors.New("output exceeds executor.max_output_bytes")

// defaultPath is the child's PATH when the worker has none.
const defaultPath = "/usr/local/bin:/usr/bin:/bin"

// Spawner starts executor processes: one per attempt in mode spawn
// (protocol v1), the long-lived children of mode persistent (child.go).
// It is safe for concurrent use and does not bound concurrency.
//
// A child runs in its own process group and, on Linux, dies with the
// worker (parent-death signal). On timeout, ctx end or output overflow the
// whole group gets SIGKILL, and so does what is left of it once the leader
// exited, so grandchildren never outlive their attempt or hold its pipes
// open (one that left the group gets ioGrace).
type Spawner struct {
	opts          Options
	argv          []string
	baseEnv       []string // inherited base + executor.env, built once
	persistentEnv []string // a persistent child's whole environment
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
	// Only these are inherited: the worker's environment may hold secrets.
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

// env is a spawned child's environment (docs/executor.md, "Environment").
// Later entries win (os/exec keeps the last of duplicate keys), so the
// protocol's SVC_* variables come last.
func (s *Spawner) env(t *model.Task, attempt int) []string {
	env := make([]string, 0, len(s.baseEnv)+len(t.Env)+len(t.Labels)+10)
	env = append(env, s.baseEnv...)
	add := func(k, v string) {
		if envOK(k, v) {
			env = append(env, k+"="+v)
		}
	}
	// The kernel refuses a single environment string over 128 KiB.
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
		if m.Key != nil {
			key, enc := payload.EncodeEnv(m.Key)
			add(model.KeyEncodingEnv, enc)
			if len(key) > envValueMax {
				add("SVC_KEY_TRUNCATED", strconv.Itoa(len(key)))
			}
			add("SVC_KEY", cut(key))
		}
	}
	// Sorted: of two labels mapping to one variable, the later name wins.
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
func failed(err error) model.AttemptResult {
	return model.AttemptResult{Status: model.StatusFailed, ExitCode: -1, Err: err}
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

// launch starts the executor with env and the first n pipes of stdin,
// stdout, stderr and fd 3, and tells the guard. A failed exec wraps
// ErrStart; a pipe that could not be made does not.
func (s *Spawner) launch(env []string, n int) (*exec.Cmd, *pipes, error) {
	bin, err := s.binary()
	if err != nil {
		return nil, nil, startError(s.opts.BinaryPath, err)
	}
	pp := &pipes{}
	if err := pp.open(n); err != nil {
		return nil, nil, err
	}
	cmd := &exec.Cmd{
		Path: bin, Args: s.argv, Env: env,
		Stdin: pp.child[0], Stdout: pp.child[1], Stderr: pp.child[2],
		ExtraFiles: pp.child[3:n], SysProcAttr: sysProcAttr(),
	}
	cmd, err = start(cmd, startCmd)
	pp.closeChild()
	if err != nil {
		pp.closeParent()
		return nil, nil, startError(s.opts.BinaryPath, err)
	}
	s.guard.note('+', cmd.Process.Pid)
	return cmd, pp, nil
}

// wait waits for cmd, then kills what is left of its group rather than
// let it hold the pipes: the pgid cannot have been reused while a member
// is alive, and with none alive the kill finds nobody.
func (s *Spawner) wait(cmd *exec.Cmd) error {
	err := cmd.Wait()
	pgid := cmd.Process.Pid
	waited(pgid)
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	s.guard.note('-', pgid)
	return err
}

// kill SIGKILLs cmd's process group, and its leader in case it moved
// itself to another group.
func kill(cmd *exec.Cmd) {
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	_ = cmd.Process.Kill()
}

// spawn runs the attempt; onStart (optional) is called once the process
// started. A result whose Err wraps ErrStart means no process started.
// Executor misbehaviour never panics; every problem ends up in the result.
func (s *Spawner) spawn(ctx context.Context, t *model.Task, attempt int, onStart func()) model.AttemptResult {
	if err := ctx.Err(); err != nil {
		return failed(fmt.Errorf("run executor: %w", err))
	}
	cmd, pp, err := s.launch(s.env(t, attempt), 4)
	if err != nil {
		if !errors.Is(err, ErrStart) {
			err = fmt.Errorf("start executor: %w", err)
		}
		return failed(err)
	}
	if onStart != nil {
		onStart()
	}
	var why atomic.Int32
	stop := func(reason int32) {
		if why.CompareAndSwap(0, reason) {
			kill(cmd)
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
		// Over the cap the group is killed at once rather than at the timeout.
		out, overflow = readCapped(pp.parent[1], s.opts.MaxOutputBytes, func() { stop(stopOverflow) })
	}()
	go func() { defer wg.Done(); stderr.readFrom(pp.parent[2]) }()
	go func() { defer wg.Done(); events.readFrom(pp.parent[3]) }()
	wg.Add(1)
	go func() {
		defer wg.Done()
		// EPIPE means the executor did not read it all; its exit decides.
		if len(t.Input) > 0 {
			_, _ = pp.parent[0].Write(t.Input)
		}
		_ = pp.parent[0].Close()
	}()

	waitErr := s.wait(cmd)
	timer.Stop()
	unwatch()
	var abandoned atomic.Bool
	grace := time.AfterFunc(ioGrace, func() { abandoned.Store(true); pp.expire() })
	wg.Wait()
	grace.Stop()
	pp.closeParent()
	if abandoned.Load() {
		s.log.Warn("executor_io_abandoned", "task_id", t.ID, "pid", cmd.Process.Pid,
			"detail", "a descendant outside the process group kept the executor's pipes open")
	}

	res := model.AttemptResult{Output: out, OutputTruncated: overflow, Stderr: stderr.bytes(), ExitCode: -1}
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
		res.Status, res.Err = model.StatusTimeout, fmt.Errorf("executor timed out after %s (executor.timeout)", s.opts.Timeout)
	case stopCanceled:
		res.Status, res.Err = model.StatusFailed, fmt.Errorf("run executor: %w", ctx.Err())
	case stopOverflow:
		res.Status, res.Err = model.StatusFailed, fmt.Errorf("%w (%d)", ErrOutputTooLarge, s.opts.MaxOutputBytes)
	default:
		res.Status, res.Err = exitStatus(st, waitErr)
	}
	return res
}

// exitStatus maps how the leader ended to a status: 0 ok, 75 tempfail,
// anything else failed.
func exitStatus(st *os.ProcessState, waitErr error) (string, error) {
	if st == nil {
		return model.StatusFailed, fmt.Errorf("wait for executor: %w", waitErr)
	}
	switch code := st.ExitCode(); {
	case code == 0:
		return model.StatusOK, nil
	case code == 75:
		return model.StatusTempFail, errors.New("executor exited with code 75 (EX_TEMPFAIL)")
	case code > 0:
		return model.StatusFailed, fmt.Errorf("executor exited with code %d", code)
	}
	return model.StatusFailed, fmt.Errorf("executor terminated: %s", st)
}

// pipes are a child's stdin, stdout, stderr and fd 3. Only the worker's
// (parent) ends are non-blocking and use the poller, so deadlines work;
// the child ends skip the round trip os.Pipe would make and os/exec undo
// (with os.Pipe a spawn cost about 5 % more worker CPU).
type pipes struct {
	parent, child [4]*os.File
}

// set stores pipe i (read end fds[0], write end fds[1]).
func (p *pipes) set(i int, fds [2]int) {
	parent, child := fds[0], fds[1]
	if i == 0 { // stdin: the child reads
		parent, child = child, parent
	}
	// Should this fail, the file is merely blocking (no deadlines).
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
