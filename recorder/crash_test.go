package recorder

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"svc/worker/event"
)

// TestCrashDetected re-executes the test binary as a worker process, kills
// it with SIGKILL while it records, then opens a recorder on the same
// storage.dir: the leftover watchdog file becomes a crash_detected event and
// the dead process's live file is sealed into history.
func TestCrashDetected(t *testing.T) {
	t.Parallel()
	dir, shared := t.TempDir(), t.TempDir()
	cmd := startChild(t, "TestCrashChild", "RECORDER_CRASH_CHILD_DIR="+dir, "RECORDER_CRASH_CHILD_SHARED="+shared)
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("kill child: %v", err)
	}
	cmd.Wait()
	mustStat(t, filepath.Join(dir, "crashy.watchdog"))

	clk := newClock()
	clk.ms.Store(time.Now().UnixMilli())
	r := mustOpen(t, baseConfig(t, dir, shared, "crashy", clk))
	if _, err := os.Stat(filepath.Join(dir, "crashy.watchdog")); !os.IsNotExist(err) {
		t.Errorf("Open left the old watchdog file: %v", err)
	}
	evs, err := r.Events(t.Context(), EventQuery{Types: []string{event.TypeCrashDetected}})
	if err != nil || len(evs) != 1 {
		t.Fatalf("Events(crash_detected) = %v, %v; want one event", evs, err)
	}
	var p watchdogState
	if err := json.Unmarshal(evs[0].Payload, &p); err != nil || p.PID != cmd.Process.Pid || p.RSSBytes <= 0 || p.TSms <= 0 {
		t.Errorf("crash_detected payload = %s, want the child's pid %d, rss and time", evs[0].Payload, cmd.Process.Pid)
	}
	trace, err := r.Trace(t.Context(), "child-task")
	if err != nil || len(trace) != 1 {
		t.Errorf("Trace(child-task) = %v, %v; want the dead child's event from its recovered file", trace, err)
	}
	if k := kinds(t, r); k["sealed"] != 1 || k["live"] != 1 {
		t.Errorf("Databases() kinds = %v, want the recovered sealed file and a live file", k)
	}
}

// startChild re-executes the test binary running only the test named run,
// with env added, and waits until it prints CHILD_READY. The child is
// killed when the test ends.
func startChild(t *testing.T, run string, env ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+run+"$")
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start child: %v", err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "CHILD_READY") {
				ready <- true
			}
		}
		close(ready)
	}()
	select {
	case ok := <-ready:
		if !ok {
			t.Fatal("child exited before it was ready")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("child never became ready")
	}
	return cmd
}

// TestCrashChild is the worker process of TestCrashDetected; it does
// nothing unless started by it.
func TestCrashChild(t *testing.T) {
	recorderChild(t, "RECORDER_CRASH_CHILD", "crashy", "TestCrashDetected")
}

// recorderChild is the helper process of the test named by parent: a
// recorder of worker in $<env>_DIR (shared folder $<env>_SHARED) that has
// written one event and its watchdog, prints CHILD_READY and waits to be
// killed.
func recorderChild(t *testing.T, env, worker, parent string) {
	dir := os.Getenv(env + "_DIR")
	if dir == "" {
		t.Skip("helper process for " + parent)
	}
	cfg := Config{Dir: dir, SharedDir: os.Getenv(env + "_SHARED"), Worker: worker, Cluster: "c1",
		WatchdogInterval: 20 * time.Millisecond, FullDetail: true} // its event written at once
	r, err := Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	go r.Run(context.Background())
	r.Event(event.Event{Type: event.TypeTaskReceived, TaskID: "child-task"})
	waitWritten(t, r, 1, 0)
	waitFile(t, filepath.Join(dir, worker+".watchdog"))
	fmt.Println("CHILD_READY")
	time.Sleep(time.Minute) // killed long before
}
