package executor

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// child is one long-lived executor process of a persistent pool. Its
// pipes are used by one holder at a time (the starter, then one task at a
// time); persistent.mu guards the fields marked so.
type child struct {
	cmd     *exec.Cmd
	pgid    int
	stdin   *os.File
	stdout  *os.File
	r       *bufio.Reader
	stderr  *stderr
	exited  chan struct{} // closed once the process was reaped
	startAt time.Time
	readyAt time.Time // set by its seat when it got ready

	// Used by the holder only. The funcs are built once so that the looks
	// before each task allocate nothing.
	outRC              syscall.RawConn  // stdout; nil: look for stray output in r only
	peekFn             func(fd uintptr) // reads what stdout holds into peek, peekN
	peek               [64]byte         // stray bytes read (never logged)
	peekN              int
	quietOut, quietErr func(fd uintptr) // poll stdout and stderr at once (nil: not available)
	pfd                [2]pollFD
	watch              runWatch // stops a task past its timeout or context

	// Guarded by persistent.mu.
	busy      bool          // a holder (starter or task) uses the pipes
	live      bool          // counted in persistent.live
	down      bool          // out of service; downCh is closed
	downWhy   string        // the restart reason of the first markDown
	closePend bool          // reaped while busy: the holder closes the pipes
	inLoop    bool          // started during its seat's crash loop, no answer yet
	probation bool          // ready while the executor was unavailable; not trusted yet
	served    int           // tasks handed to it
	answered  int           // result frames it sent
	downCh    chan struct{} // closed when the child leaves service
}

// startChild starts one child and waits for its ready frame, at most
// readyTimeout or until ctx ends; onReaped is called once the process is
// gone. The child comes back busy (held by the caller). The error wraps
// ErrStart; why is the restart reason.
func (s *Spawner) startChild(ctx context.Context, readyTimeout time.Duration, onReaped func(*child)) (c *child, why string, err error) {
	cmd, pp, err := s.launch(s.persistentEnv, 3)
	if err != nil {
		if !errors.Is(err, ErrStart) {
			err = fmt.Errorf("%w: %w", ErrStart, err)
		}
		return nil, reasonStartFailed, err
	}
	nc := &child{
		cmd: cmd, pgid: cmd.Process.Pid, stdin: pp.parent[0], stdout: pp.parent[1],
		r: bufio.NewReaderSize(pp.parent[1], 64<<10), stderr: newExecStderr(pp.parent[2], s.opts.StderrTail),
		exited: make(chan struct{}), downCh: make(chan struct{}), busy: true, startAt: time.Now(),
	}
	c = nc
	c.initPeek()
	c.initQuiet()
	go c.stderr.loop()
	go func() {
		_ = s.wait(cmd)
		close(nc.exited)
		onReaped(nc)
	}()

	var timedOut atomic.Bool
	// The timer may still run after Stop: it uses nc, never c.
	timer := time.AfterFunc(readyTimeout, func() { timedOut.Store(true); nc.kill() })
	unwatch := context.AfterFunc(ctx, nc.kill)
	header, _, err := readFrame(c.r, 0)
	timer.Stop()
	unwatch()
	if err == nil {
		err = checkReady(header)
		if err == nil {
			return c, "", nil
		}
	}
	c.kill()
	<-c.exited
	tail := tailText(c.stderr.take())
	c.closePipes()
	switch {
	case timedOut.Load():
		return nil, reasonNotReady, &readyErr{cause: "no ready frame within executor.ready_timeout",
			err: fmt.Errorf("%w: no ready frame within %s (executor.ready_timeout)%s", ErrStart, readyTimeout, tail)}
	case ctx.Err() != nil:
		return nil, reasonStopped, fmt.Errorf("%w: %w", ErrStart, ctx.Err())
	case (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)) && signaled(c.cmd.ProcessState):
		// Killed from outside (an operator, the OOM killer): no crash loop.
		return nil, reasonKilled, fmt.Errorf("%w: executor.binary_path %q was killed before its ready frame (%s)%s",
			ErrStart, s.opts.BinaryPath, c.cmd.ProcessState, tail)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return nil, reasonNotReady, &readyErr{cause: "they exit before their ready frame",
			err: fmt.Errorf("%w: executor.binary_path %q exited before its ready frame (%s)%s", ErrStart, s.opts.BinaryPath, c.cmd.ProcessState, tail)}
	}
	return nil, reasonNotReady, &readyErr{cause: "their first frame is not a ready frame",
		err: fmt.Errorf("%w: executor.binary_path %q: %w%s", ErrStart, s.opts.BinaryPath, err, tail)}
}

// readyErr is a child's failed start-up; cause says it in short, without
// the child's output.
type readyErr struct {
	cause string
	err   error
}

func (e *readyErr) Error() string { return e.err.Error() }
func (e *readyErr) Unwrap() error { return e.err }

// checkReady accepts a ready frame's header.
func checkReady(header []byte) error {
	var h resultHeader
	if err := json.Unmarshal(header, &h); err != nil {
		return fmt.Errorf("%w: ready header is not JSON: %v", errFrameProtocol, err)
	}
	if h.Type != frameTypeReady {
		return fmt.Errorf("%w: first frame has type %q, want %q", errFrameProtocol, h.Type, frameTypeReady)
	}
	return nil
}

// tailText is the end of a stderr tail for an error message.
func tailText(b []byte) string {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return ""
	}
	if len(b) > 200 {
		b = b[len(b)-200:]
	}
	return fmt.Sprintf("; stderr: %q", b)
}

// initPeek readies stray: a look at stdout must never wait.
func (c *child) initPeek() {
	rc, err := c.stdout.SyscallConn()
	if err != nil {
		return
	}
	nonblock := false
	_ = rc.Control(func(fd uintptr) { nonblock = syscall.SetNonblock(int(fd), true) == nil })
	if !nonblock {
		return
	}
	c.outRC = rc
	c.peekFn = func(fd uintptr) {
		for {
			n, err := syscall.Read(int(fd), c.peek[:])
			if errors.Is(err, syscall.EINTR) {
				continue
			}
			c.peekN = max(n, 0) // 0: empty (EAGAIN) or EOF (the child is exiting)
			return
		}
	}
}

// stray reports stdout output no task asked for: n bytes left in r or,
// with pipe, waiting in the pipe (read and dropped, at most len(peek): the
// child is to be replaced); text says they begin like text, not a frame.
func (c *child) stray(pipe bool) (n int, text bool) {
	if n = c.r.Buffered(); n > 0 {
		b, _ := c.r.Peek(min(n, 4))
		return n, len(b) == 4 && looksLikeText(b)
	}
	if !pipe || c.outRC == nil {
		return 0, false
	}
	c.peekN = 0
	_ = c.outRC.Control(c.peekFn)
	return c.peekN, c.peekN >= 4 && looksLikeText(c.peek[:4])
}

// kill SIGKILLs the child's whole process group.
func (c *child) kill() { kill(c.cmd) }

// exitText says how the reaped child ended.
func (c *child) exitText() string {
	if st := c.cmd.ProcessState; st != nil {
		return st.String()
	}
	return "not reaped"
}

// exitCode is the reaped child's exit code, -1 when killed by a signal.
func (c *child) exitCode() int {
	if st := c.cmd.ProcessState; st != nil {
		return st.ExitCode()
	}
	return -1
}

// retire stops an idle child: EOF on stdin, SIGTERM to its group after
// grace, SIGKILL after as long again.
func (c *child) retire(grace time.Duration) {
	_ = c.stdin.Close()
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		if !after(grace, c.exited) {
			return
		}
		_ = syscall.Kill(-c.pgid, sig)
		_ = c.cmd.Process.Signal(sig)
	}
	<-c.exited
}

// closePipes closes the worker's ends of the child's pipes.
func (c *child) closePipes() {
	c.watch.release()
	_ = c.stdin.Close()
	_ = c.stdout.Close()
	c.stderr.close()
}

// stderr keeps the tail of a child's stderr. loop drains the pipe as data
// comes; take drains what is left under the same lock, so every byte
// written before a result frame is in that result.
type stderr struct {
	mu    sync.Mutex
	f     *os.File
	rc    syscall.RawConn
	tail  tail
	buf   []byte
	drain func(fd uintptr) // drainLocked for rc.Control, built once
}

func newExecStderr(f *os.File, keep int) *stderr {
	s := &stderr{f: f, tail: tail{max: keep}, buf: make([]byte, 4096)}
	s.rc, _ = f.SyscallConn()
	s.drain = func(fd uintptr) { s.drainLocked(fd) }
	return s
}

// loop drains the pipe until EOF or close.
func (s *stderr) loop() {
	if s.rc == nil {
		return
	}
	_ = s.rc.Read(func(fd uintptr) bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.drainLocked(fd)
	})
}

// drainLocked reads what the pipe holds; true at EOF or on a hard error.
func (s *stderr) drainLocked(fd uintptr) bool {
	for {
		n, err := syscall.Read(int(fd), s.buf)
		if n > 0 {
			s.tail.write(s.buf[:n])
			continue
		}
		switch {
		case errors.Is(err, syscall.EINTR):
			continue
		case errors.Is(err, syscall.EAGAIN):
			return false
		}
		return true
	}
}

// take returns and forgets the tail, including bytes still in the pipe.
func (s *stderr) take() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rc != nil {
		_ = s.rc.Control(s.drain)
	}
	if len(s.tail.buf) == 0 {
		return nil
	}
	out := bytes.Clone(s.tail.bytes())
	s.tail.buf = s.tail.buf[:0]
	return out
}

// discard forgets the tail without reading the pipe (known empty).
func (s *stderr) discard() {
	s.mu.Lock()
	s.tail.buf = s.tail.buf[:0]
	s.mu.Unlock()
}

func (s *stderr) close() { _ = s.f.Close() }

// signaled reports a process that ended by a signal.
func signaled(st *os.ProcessState) bool {
	ws, ok := st.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled()
}
