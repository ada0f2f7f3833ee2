package main

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"svc/worker/workertest"
	"svc/worker/workertest/wait"
)

// Issue 42: run as PID 1 (a container without an init), svc left one
// zombie per request of an executor that backgrounds a process (20 after
// 20 requests): orphans of executor trees are re-parented to PID 1, which
// must reap them. The worker is PID 1 of its own PID namespace here, on
// the real binary; its executor leaves a process in its group (killed when
// the executor exits) and one in a session of its own (exits later, by
// itself). No zombie may remain under the worker.
func TestNoZombiesAsPID1(t *testing.T) {
	t.Parallel()
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("unshare (util-linux) is not installed: cannot run svc as PID 1 of a PID namespace")
	}
	if out, err := exec.Command(unshare, "--pid", "--fork", "--mount-proc", "--kill-child", "true").CombinedOutput(); err != nil {
		t.Skipf("unshare --pid is not permitted here (it needs root or user namespaces): %v: %s", err, out)
	}
	setsid, err := exec.LookPath("setsid")
	if err != nil {
		t.Skip("setsid (util-linux) is not installed")
	}
	dir := t.TempDir()
	exe := filepath.Join(dir, "bg.sh")
	script := fmt.Sprintf("#!/bin/sh\nsleep 0.1 &\n%s sleep 1 </dev/null >/dev/null 2>&1 3>&- &\ncat\n", setsid)
	if err := os.WriteFile(exe, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	ui, in := freePort(t), freePort(t)
	cfg := workertest.WriteConfig(t, fmt.Sprintf(`
[worker]
name = "pid1"
[metrics]
enabled = false
[ui]
port = %d
[storage]
dir = ""
[executor]
binary_path = %q
pool_size = 4
[sources.http]
enabled = true
host = "127.0.0.1"
port = %d
`, ui, exe, in))
	p := workertest.Start(t, unshare, "--pid", "--fork", "--mount-proc", "--kill-child", svcBin, "run", "-config", cfg)
	p.WaitHTTP(t, fmt.Sprintf("http://127.0.0.1:%d/healthz", ui))
	worker := procChild(t, p.Cmd.Process.Pid)
	if comm := procStat(worker)[1]; comm != "(svc)" {
		t.Fatalf("the worker under unshare is %s, want svc", comm)
	}

	const n = 20
	for i := range n {
		r, err := http.Post(fmt.Sprintf("http://127.0.0.1:%d/v1/process", in), "application/octet-stream", strings.NewReader(fmt.Sprintf("req-%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
		if r.StatusCode != 200 {
			t.Fatalf("request %d = %d, want 200", i, r.StatusCode)
		}
	}
	// The last request's escaped sleep still runs, re-parented to the
	// worker (the path under test is taken).
	if s := sleepsOf(worker); len(s) == 0 {
		t.Fatalf("no orphaned sleep under the worker right after the requests; children: %v", procChildren(worker))
	}
	// They all exit within 1 s of their request; then none may be left,
	// running or unreaped.
	wait.For(t, 15*time.Second, "no sleep, running or zombie, under the worker", func() (bool, string) {
		s, z := sleepsOf(worker), zombiesOf(worker)
		return len(s) == 0 && len(z) == 0, fmt.Sprintf("%d sleeps and %d zombies under the worker (pid %d): %v", len(s), len(z), worker, z)
	})
	// As PID 1 it still stops on SIGTERM (no init needed to forward it):
	// a drain, exit 0, which unshare passes on.
	if err := syscall.Kill(worker, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.Wait(t); code != 0 {
		t.Errorf("svc as PID 1 exited %d after SIGTERM, want 0; output:\n%s", code, p.Output.String())
	}
}

// procChild is the one child of pid, waited for.
func procChild(t *testing.T, pid int) int {
	t.Helper()
	var child int
	wait.For(t, 10*time.Second, fmt.Sprintf("a child of pid %d", pid), func() (bool, string) {
		kids := procChildren(pid)
		if len(kids) == 1 {
			child = kids[0]
		}
		return len(kids) == 1, fmt.Sprintf("children %v", kids)
	})
	return child
}

// procChildren are the processes whose parent is pid.
func procChildren(pid int) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if f := procStat(p); len(f) > 3 && f[3] == strconv.Itoa(pid) {
			out = append(out, p)
		}
	}
	return out
}

// sleepsOf are the children of pid that are (or were: zombies) sleep.
func sleepsOf(pid int) []int {
	var out []int
	for _, c := range procChildren(pid) {
		if f := procStat(c); len(f) > 1 && f[1] == "(sleep)" {
			out = append(out, c)
		}
	}
	return out
}

// zombiesOf are the children of pid in state Z.
func zombiesOf(pid int) []int {
	var out []int
	for _, c := range procChildren(pid) {
		if f := procStat(c); len(f) > 2 && f[2] == "Z" {
			out = append(out, c)
		}
	}
	return out
}

// procStat is /proc/pid/stat split in fields (pid, (comm), state, ppid,
// ...); nil when the process is gone. A comm with spaces is kept whole.
func procStat(pid int) []string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil
	}
	s := string(b)
	i, j := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if i < 0 || j < i {
		return nil
	}
	return append([]string{strings.TrimSpace(s[:i]), s[i : j+1]}, strings.Fields(s[j+1:])...)
}
