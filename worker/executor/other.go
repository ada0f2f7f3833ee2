//go:build !linux

package executor

import (
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"syscall"
)

// sysProcAttr puts a child in its own process group. Outside Linux
// there is no parent-death signal: children of a killed worker survive it.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// open creates the first n pipes (stdin, stdout, stderr, fd 3).
func (p *pipes) open(n int) error {
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

// unread is unknown outside Linux: a child found dead counts as having
// read its task.
func unread(*os.File) int { return -1 }

// startCmd starts cmd.
func startCmd(cmd *exec.Cmd) (*exec.Cmd, error) { return cmd, cmd.Start() }

// pollFD is unused outside Linux.
type pollFD struct{}

// initQuiet does nothing outside Linux: quiet always says "look".
func (c *child) initQuiet() {}

// quiet reports that both pipes must be looked at with reads.
func (c *child) quiet() (out, errOut bool) { return true, true }

// StartReaper does nothing outside Linux: there is no child subreaper, and
// a worker is not PID 1 of a container there.
func StartReaper(*slog.Logger) (stop func()) { return func() {} }

type reaper struct{}

func newReaper() *reaper { return &reaper{} }
func (*reaper) reap()    {}
