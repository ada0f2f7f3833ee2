//go:build !linux

package executor

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
)

// execSysProcAttr puts a child in its own process group. Outside Linux
// there is no parent-death signal: children of a killed worker survive it.
func execSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// open creates the first n pipes (stdin, stdout, stderr, fd 3).
func (p *execPipes) open(n int) error {
	for i := range n {
		var fds [2]int
		syscall.ForkLock.RLock()
		err := syscall.Pipe(fds[:])
		if err == nil {
			syscall.CloseOnExec(fds[0])
			syscall.CloseOnExec(fds[1])
		}
		syscall.ForkLock.RUnlock()
		if err != nil {
			p.closeChild()
			p.closeParent()
			return fmt.Errorf("create pipe: %w", err)
		}
		p.set(i, fds)
	}
	return nil
}

// execUnread is unknown outside Linux: a child found dead counts as having
// read its task.
func execUnread(*os.File) int { return -1 }

// execStartCmd starts cmd.
func execStartCmd(cmd *exec.Cmd) (*exec.Cmd, error) { return cmd, cmd.Start() }
