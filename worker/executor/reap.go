package executor

import (
	"os/exec"
	"sync"
)

// procs is every process this package started and waits for itself: the
// reaper must never reap one, or its exit status would be lost.
var procs = struct {
	// gate is held shared while a process starts and is recorded, and by
	// the reaper while it reaps: no child is taken for an orphan early.
	gate sync.RWMutex
	mu   sync.Mutex
	pids map[int]int // pid → starts not waited for yet
}{pids: map[int]int{}}

// start starts cmd with start and records its process until waited.
func start(cmd *exec.Cmd, start func(*exec.Cmd) (*exec.Cmd, error)) (*exec.Cmd, error) {
	procs.gate.RLock()
	defer procs.gate.RUnlock()
	cmd, err := start(cmd)
	if err == nil {
		procs.mu.Lock()
		procs.pids[cmd.Process.Pid]++
		procs.mu.Unlock()
	}
	return cmd, err
}

// waited forgets a process started by start once Wait returned.
func waited(pid int) {
	procs.mu.Lock()
	defer procs.mu.Unlock()
	if procs.pids[pid]--; procs.pids[pid] <= 0 {
		delete(procs.pids, pid)
	}
}

// own reports whether pid was started by start and not waited for yet.
func own(pid int) bool {
	procs.mu.Lock()
	defer procs.mu.Unlock()
	return procs.pids[pid] > 0
}
