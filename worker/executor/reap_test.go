package executor

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"svc/worker/model"
)

// The reaper takes the orphans of executor trees and never the exit
// status of a process the pool waits for itself: 400 spawn-mode tasks,
// each an executor that leaves a child behind and exits with the code its
// input names, keep their exit codes while the reaper reaps on every
// SIGCHLD; and no zombie is left. Run in a process of its own (the test
// binary as `exec-reaper`): the reaper is process-wide, and other tests
// start children it does not know.
func TestReaperNeverStealsAnExitStatus(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("the reaper works on Linux only (StartReaper does nothing elsewhere)")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(self, "exec-reaper").CombinedOutput()
	if err != nil {
		t.Fatalf("exec-reaper: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "reaper ok") {
		t.Fatalf("exec-reaper said:\n%s", out)
	}
}

// reaperMain is TestReaperNeverStealsAnExitStatus's process.
func reaperMain() int {
	fail := func(f string, a ...any) int { fmt.Printf(f+"\n", a...); return 1 }
	defer StartReaper(nil)()
	p, err := NewPool(Options{Mode: ModeSpawn, BinaryPath: "/bin/sh",
		Args:     []string{"-c", `read code; sleep 0.05 & setsid sleep 0.02 </dev/null >/dev/null 2>&1 3>&- & exit "$code"`},
		PoolSize: 8, Timeout: 20 * time.Second, MaxAttempts: 1, RetryBackoff: time.Millisecond})
	if err != nil {
		return fail("NewPool: %v", err)
	}
	defer p.Close()
	var wg sync.WaitGroup
	errs := make(chan string, 400)
	for i := range 400 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code := []int{0, 3, 7}[i%3]
			res := p.Run(context.Background(), &model.Task{ID: fmt.Sprintf("t-%d", i), Input: []byte(strconv.Itoa(code) + "\n")})
			want := model.StatusOK
			if code != 0 {
				want = model.StatusFailed
			}
			if res.ExitCode != code || res.Status != want {
				errs <- fmt.Sprintf("task %d = %s exit %d (%v), want %s exit %d", i, res.Status, res.ExitCode, res.Err, want, code)
			}
		}()
	}
	wg.Wait()
	close(errs)
	n := 0
	for e := range errs {
		if n++; n <= 5 {
			fmt.Println(e)
		}
	}
	if n > 0 {
		return fail("%d of 400 tasks lost their exit status", n)
	}
	// Every orphan (re-parented here: the process is their subreaper)
	// exits within 50 ms; then none may be left, running or a zombie.
	deadline := time.Now().Add(15 * time.Second)
	for {
		kids := testChildren()
		if len(kids) == 0 {
			break
		}
		if time.Now().After(deadline) {
			return fail("children left 15 s after the tasks: %v", kids)
		}
		time.Sleep(20 * time.Millisecond)
	}
	fmt.Println("reaper ok")
	return 0
}

// testChildren describes this process's children other than its
// executor guard, as "pid:state:comm".
func testChildren() []string {
	var out []string
	tasks, _ := os.ReadDir("/proc/self/task")
	for _, t := range tasks {
		b, _ := os.ReadFile("/proc/self/task/" + t.Name() + "/children")
		for _, f := range strings.Fields(string(b)) {
			st, err := os.ReadFile("/proc/" + f + "/stat")
			if err != nil {
				continue
			}
			s := string(st)
			i, j := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
			if i < 0 || j < i || len(s) < j+3 {
				continue
			}
			out = append(out, f+":"+s[j+2:j+3]+":"+s[i+1:j])
		}
	}
	return out
}

// BenchmarkReaperLook is one look of the reaper (what each SIGCHLD costs,
// at most once per reapMinGap): list the children, reap none.
func BenchmarkReaperLook(b *testing.B) {
	if runtime.GOOS != "linux" {
		b.Skip("Linux only")
	}
	r := newReaper()
	for b.Loop() {
		r.reap()
	}
}
