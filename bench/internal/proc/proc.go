// Package proc reads a process's CPU time and memory from /proc (Linux),
// for the benchmarks' worker CPU per task and peak RSS figures.
package proc

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// clockTick is USER_HZ, 100 on every Linux the benchmarks run on (the
// kernel exports /proc times in it whatever CONFIG_HZ is).
const clockTick = 100

// CPU is a sample of one process's CPU time.
type CPU struct {
	Self     time.Duration // utime + stime: the process's own threads
	Children time.Duration // cutime + cstime: children it has waited for
}

// ReadCPU samples pid's CPU time from /proc/<pid>/stat. A child's CPU is
// not in Self; it is added to Children only once the child was waited for
// (so persistent executors that stay alive never show up there).
func ReadCPU(pid int) (CPU, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return CPU{}, err
	}
	// The command name (field 2) may hold spaces: fields count from the
	// last ')'.
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return CPU{}, fmt.Errorf("/proc/%d/stat: no ')'", pid)
	}
	f := strings.Fields(s[i+1:]) // f[0] is field 3 (state)
	if len(f) < 15 {
		return CPU{}, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	tick := func(k int) time.Duration { // k: the field number of proc(5)
		n, _ := strconv.ParseInt(f[k-3], 10, 64)
		return time.Duration(n) * time.Second / clockTick
	}
	return CPU{Self: tick(14) + tick(15), Children: tick(16) + tick(17)}, nil
}

// TreeCPU is the CPU time (utime + stime) of pid's live descendants, not
// pid itself: for persistent executor children, whose CPU is never in
// their parent's figures while they live.
func TreeCPU(pid int) time.Duration {
	var sum time.Duration
	for _, c := range Children(pid) {
		if cpu, err := ReadCPU(c); err == nil {
			sum += cpu.Self
		}
		sum += TreeCPU(c)
	}
	return sum
}

// ChildrenCPU splits the CPU time of pid's live descendants in two:
// helpers, the children running pid's own binary (svc's executor guard,
// `svc svc-executor-guard`: part of the worker, not of the executor), with
// their descendants; and the others (the executors).
func ChildrenCPU(pid int) (helpers, others time.Duration) {
	self, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	for _, c := range Children(pid) {
		var d time.Duration
		if cpu, err := ReadCPU(c); err == nil {
			d = cpu.Self
		}
		d += TreeCPU(c)
		if exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", c)); self != "" && exe == self {
			helpers += d
		} else {
			others += d
		}
	}
	return helpers, others
}

// Children lists pid's direct children (from every thread's children file).
func Children(pid int) []int {
	files, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	var out []int
	for _, f := range files {
		data, _ := os.ReadFile(f)
		for _, w := range strings.Fields(string(data)) {
			if n, err := strconv.Atoi(w); err == nil {
				out = append(out, n)
			}
		}
	}
	return out
}

// StatusKB reads a kB field of /proc/<pid>/status (VmHWM, VmRSS); 0 when
// unreadable.
func StatusKB(pid int, field string) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return n
		}
	}
	return 0
}
