//go:build linux

package executor

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
	"unsafe"
)

// sysProcAttr puts a child in its own process group and has the kernel
// SIGKILL it when the worker dies.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// open creates the first n pipes (stdin, stdout, stderr, fd 3) with
// close-on-exec set atomically.
func (p *pipes) open(n int) error {
	for i := range n {
		var fds [2]int
		if err := syscall.Pipe2(fds[:], syscall.O_CLOEXEC); err != nil {
			p.closeChild()
			p.closeParent()
			return fmt.Errorf("create pipe: %w", os.NewSyscallError("pipe2", err))
		}
		p.set(i, fds)
	}
	return nil
}

// unread is how many bytes written to the pipe f (a write end) are not
// read yet, -1 when unknown.
func unread(f *os.File) int {
	rc, err := f.SyscallConn()
	if err != nil {
		return -1
	}
	n := -1
	_ = rc.Control(func(fd uintptr) {
		var v int32
		if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCINQ, uintptr(unsafe.Pointer(&v))); e == 0 {
			n = int(v)
		}
	})
	return n
}

// startCmd starts cmd, retrying "text file busy" (ETXTBSY: a binary just
// written while a concurrent fork holds its write descriptor) with a fresh
// Cmd for about 300 ms. It returns the Cmd that started (or failed last).
func startCmd(cmd *exec.Cmd) (*exec.Cmd, error) {
	err := cmd.Start()
	for i := 0; i < 6 && errors.Is(err, syscall.ETXTBSY); i++ {
		time.Sleep(time.Duration(5<<i) * time.Millisecond)
		cmd = &exec.Cmd{Path: cmd.Path, Args: cmd.Args, Env: cmd.Env, Dir: cmd.Dir,
			Stdin: cmd.Stdin, Stdout: cmd.Stdout, Stderr: cmd.Stderr, ExtraFiles: cmd.ExtraFiles, SysProcAttr: cmd.SysProcAttr}
		err = cmd.Start()
	}
	return cmd, err
}

// pollFD is struct pollfd of poll(2).
type pollFD struct {
	fd      int32
	events  int16
	revents int16
}

const pollIn = 0x1 // POLLIN; POLLHUP and POLLERR are reported unasked

// initQuiet readies quiet: one ppoll(2) with a zero timeout on the
// worker's ends of stdout and stderr.
func (c *child) initQuiet() {
	if c.outRC == nil || c.stderr.rc == nil {
		return
	}
	c.quietOut = func(fd uintptr) {
		c.pfd[0] = pollFD{fd: int32(fd), events: pollIn}
		if c.stderr.rc.Control(c.quietErr) != nil {
			c.pfd[0].revents, c.pfd[1].revents = -1, -1 // closed: look with reads
		}
	}
	c.quietErr = func(fd uintptr) {
		c.pfd[1] = pollFD{fd: int32(fd), events: pollIn}
		var ts syscall.Timespec
		for {
			_, _, errno := syscall.Syscall6(syscall.SYS_PPOLL, uintptr(unsafe.Pointer(&c.pfd[0])), 2, uintptr(unsafe.Pointer(&ts)), 0, 0, 0)
			if errno == syscall.EINTR {
				continue
			}
			if errno != 0 {
				c.pfd[0].revents, c.pfd[1].revents = -1, -1
			}
			return
		}
	}
}

// quiet asks with one system call whether the child's stdout and stderr
// hold anything (or were closed); both true when it cannot ask.
func (c *child) quiet() (out, errOut bool) {
	if c.quietOut == nil || c.outRC.Control(c.quietOut) != nil {
		return true, true
	}
	return c.pfd[0].revents != 0, c.pfd[1].revents != 0
}
