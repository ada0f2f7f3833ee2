package executor

import (
	"bufio"
	"io"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
)

// GuardArg is argv[1] of the executor guard, a process of the worker's own
// binary that is told every executor process group started and ended, and
// SIGKILLs the ones still listed when the worker dies (even by SIGKILL).
// The binary must call RunGuard when started with it (svc's main does).
const GuardArg = "svc-executor-guard"

// RunGuard is the guard's main: it reads "+PGID" and "-PGID" lines from r
// until EOF, then kills every group still listed. It returns the exit code.
func RunGuard(r io.Reader) int {
	groups := map[int]bool{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if len(line) < 2 {
			continue
		}
		pgid, err := strconv.Atoi(line[1:])
		if err != nil || pgid <= 1 {
			continue
		}
		if line[0] == '+' {
			groups[pgid] = true
		} else {
			delete(groups, pgid)
		}
	}
	for pgid := range groups {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
	return 0
}

// guard is the worker's side of the guard process.
type guard struct {
	once sync.Once
	bin  string
	mu   sync.Mutex
	w    io.WriteCloser // nil when the guard could not start
}

// note tells the guard that process group pgid started (+) or ended (-).
// A guard that failed or died is ignored (Pdeathsig still covers the
// executors themselves).
func (g *guard) note(op byte, pgid int) {
	if g == nil || g.bin == "" {
		return
	}
	g.once.Do(g.start)
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.w == nil {
		return
	}
	// One write under PIPE_BUF: the line arrives whole.
	if _, err := g.w.Write(append(strconv.AppendInt([]byte{op}, int64(pgid), 10), '\n')); err != nil {
		_ = g.w.Close()
		g.w = nil
	}
}

func (g *guard) start() {
	cmd := exec.Command(g.bin, GuardArg)
	cmd.Env = []string{}
	// Its own group: Ctrl-C to the worker's group leaves it to clean up.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	w, err := cmd.StdinPipe()
	if err != nil {
		return
	}
	cmd, err = start(cmd, func(c *exec.Cmd) (*exec.Cmd, error) { return c, c.Start() })
	if err != nil {
		return
	}
	go func() { _ = cmd.Wait(); waited(cmd.Process.Pid) }()
	g.w = w
}

// close ends the guard (EOF): it kills what is still listed, then exits.
func (g *guard) close() {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.w != nil {
		_ = g.w.Close()
		g.w = nil
	}
}
