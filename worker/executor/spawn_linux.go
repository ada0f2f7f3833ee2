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
