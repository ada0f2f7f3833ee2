//go:build linux

package executor

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"svc/worker/workertest/wait"
)

// A worker killed with SIGKILL leaves no executor and no grandchild of one
// behind: the parent-death signal kills the executor, the guard its group.
func TestSIGKILLedWorkerLeavesNoExecutorTree(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	eachMode(t, func(t *testing.T, mode string) {
		dir := t.TempDir()
		w := exec.Command(self, "exec-worker", mode, dir)
		if err := w.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = w.Process.Kill() }) // when the wait below fails
		pidFile := filepath.Join(dir, "grandchild.pid")
		wait.For(t, wait.Long, "the worker's executor to start its grandchild", func() (bool, string) {
			b, err := os.ReadFile(pidFile)
			return err == nil && len(b) > 0, fmt.Sprintf("pid file %q, %v", b, err)
		})
		grandchild := readPid(t, pidFile)
		executors := childrenOf(w.Process.Pid)
		if len(executors) == 0 {
			t.Fatal("found no executor process under the worker")
		}
		_ = w.Process.Kill()
		_ = w.Wait()
		for _, pid := range append(executors, grandchild) {
			waitGone(t, pid)
		}
	})
}

// childrenOf lists the pids whose parent is pid, from procfs.
func childrenOf(pid int) []int {
	dirs, _ := os.ReadDir("/proc")
	var pids []int
	for _, d := range dirs {
		n, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + d.Name() + "/stat")
		if err != nil {
			continue
		}
		f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			pids = append(pids, n)
		}
	}
	return pids
}
