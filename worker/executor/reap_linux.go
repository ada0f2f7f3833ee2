//go:build linux

package executor

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// prSetChildSubreaper is prctl's PR_SET_CHILD_SUBREAPER.
const prSetChildSubreaper = 36

// Reaper pacing: a look on SIGCHLD at most every reapMinGap, and one every
// reapEvery.
const (
	reapMinGap = 50 * time.Millisecond
	reapEvery  = time.Second
)

// StartReaper makes the process the child subreaper of its descendants
// (PR_SET_CHILD_SUBREAPER) and reaps the executors' orphans, as PID 1 must
// too, leaving the processes this package started to their own Wait. Call
// it only in a program whose children all come from this package (svc
// run). It returns the function that stops reaping.
func StartReaper(log *slog.Logger) (stop func()) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	_, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0)
	pid1 := os.Getpid() == 1
	if errno != 0 && !pid1 {
		log.Warn("executor_reaper_off", "error", errno.Error(),
			"detail", "cannot become the child subreaper of the executors; their orphans go to init")
		return func() {}
	}
	log.Info("executor_reaper_started", "pid", os.Getpid(), "pid1", pid1, "subreaper", errno == 0)
	r := newReaper()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGCHLD)
	done, quit := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(reapEvery)
		defer tick.Stop()
		for {
			r.reap()
			if !after(reapMinGap, quit) {
				return
			}
			select {
			case <-quit:
				return
			case <-sig:
			case <-tick.C:
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			signal.Stop(sig)
			close(quit)
			<-done
		})
	}
}

// reaper reaps the orphans re-parented to the process.
type reaper struct {
	self int
	kids bool // the kernel has /proc/PID/task/TID/children (else: scan /proc)
}

func newReaper() *reaper {
	r := &reaper{self: os.Getpid()}
	_, err := os.Stat("/proc/self/task/" + strconv.Itoa(r.self) + "/children")
	r.kids = err == nil
	return r
}

// reap waits, without blocking, for every exited child this package did
// not start.
func (r *reaper) reap() {
	procs.gate.Lock()
	defer procs.gate.Unlock()
	for _, pid := range r.children() {
		if own(pid) {
			continue
		}
		var ws syscall.WaitStatus
		for {
			if _, err := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil); !errors.Is(err, syscall.EINTR) {
				break
			}
		}
	}
}

// children lists the process's children: from each thread's children
// file, else from a scan of /proc.
func (r *reaper) children() []int {
	var out []int
	if r.kids {
		tasks, _ := os.ReadDir("/proc/self/task")
		for _, t := range tasks {
			b, _ := os.ReadFile("/proc/self/task/" + t.Name() + "/children")
			for _, f := range bytes.Fields(b) {
				if pid, err := strconv.Atoi(string(f)); err == nil {
					out = append(out, pid)
				}
			}
		}
		return out
	}
	ents, _ := os.ReadDir("/proc")
	self := strconv.Itoa(r.self)
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		if f := bytes.Fields(b[i+1:]); len(f) > 1 && string(f[1]) == self {
			out = append(out, pid)
		}
	}
	return out
}
