package executor

import (
	"os/exec"
	"sync"
)

// execProcs is every process this package started and waits for itself
// (os/exec's Wait): the reaper (StartReaper) must never reap one of them,
// or its Wait would fail and its exit status be lost.
var execProcs = struct {
	// gate is held shared while a process starts and is recorded, and
	// held by the reaper while it reaps: a child that exits at once is
	// never taken for an orphan before it is recorded.
	gate sync.RWMutex
	mu   sync.Mutex
	pids map[int]int // pid → starts not waited for yet
}{pids: map[int]int{}}

// execStart starts cmd with start and records its process until
// execWaited is called for it.
func execStart(cmd *exec.Cmd, start func(*exec.Cmd) (*exec.Cmd, error)) (*exec.Cmd, error) {
	execProcs.gate.RLock()
	defer execProcs.gate.RUnlock()
	cmd, err := start(cmd)
	if err == nil {
		execProcs.mu.Lock()
		execProcs.pids[cmd.Process.Pid]++
		execProcs.mu.Unlock()
	}
	return cmd, err
}

// execWaited forgets a process started by execStart once Wait returned.
func execWaited(pid int) {
	execProcs.mu.Lock()
	defer execProcs.mu.Unlock()
	if execProcs.pids[pid]--; execProcs.pids[pid] <= 0 {
		delete(execProcs.pids, pid)
	}
}

// execOwn reports whether pid is a process started by execStart and not
// waited for yet.
func execOwn(pid int) bool {
	execProcs.mu.Lock()
	defer execProcs.mu.Unlock()
	return execProcs.pids[pid] > 0
}
