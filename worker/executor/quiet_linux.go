//go:build linux

package executor

import (
	"syscall"
	"unsafe"
)

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
