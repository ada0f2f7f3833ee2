package recorder

import (
	"context"
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"svc/worker/event"
)

// TestSecondProcessRefused runs a worker in a child process, then opens a
// recorder with the same worker name and storage.dir here: it is refused
// with ErrInUse naming the child's PID, and the child's live file, watchdog
// and history are untouched (no false crash_detected). Once the child is
// killed the lock is free and the crash is detected.
func TestSecondProcessRefused(t *testing.T) {
	t.Parallel()
	dir, shared := t.TempDir(), t.TempDir()
	cmd := startChild(t, "TestLockChild", "RECORDER_LOCK_CHILD_DIR="+dir, "RECORDER_LOCK_CHILD_SHARED="+shared)
	pid := strconv.Itoa(cmd.Process.Pid)
	watchdog := filepath.Join(dir, "twin.watchdog")
	lives, _ := filepath.Glob(filepath.Join(dir, "recorder", "twin-*.db"))
	if len(lives) != 1 || !fileExists(watchdog) {
		t.Fatalf("child files: live %v, watchdog %v", lives, fileExists(watchdog))
	}

	clk := newClock()
	clk.ms.Store(time.Now().UnixMilli())
	r, err := Open(context.Background(), baseConfig(t, dir, shared, "twin", clk))
	if err == nil {
		r.Close()
		t.Fatal("Open() with the same worker and storage.dir as a running process succeeded, want ErrInUse")
	}
	if !errors.Is(err, ErrInUse) || !strings.Contains(err.Error(), pid) {
		t.Errorf("Open() error = %v, want ErrInUse naming pid %s", err, pid)
	}
	if !fileExists(watchdog) || !fileExists(lives[0]) {
		t.Errorf("refused Open removed the running worker's watchdog (%v) or live file (%v)", fileExists(watchdog), fileExists(lives[0]))
	}
	if sealed, _ := filepath.Glob(filepath.Join(shared, "history", "c1", "twin-*")); len(sealed) != 0 {
		t.Errorf("refused Open sealed the running worker's live file: %v", sealed)
	}
	// Another worker name on the same storage.dir is not affected.
	other := mustOpen(t, baseConfig(t, dir, shared, "other", clk))
	other.Close()

	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	r = mustOpen(t, baseConfig(t, dir, shared, "twin", clk))
	evs, err := r.Events(t.Context(), EventQuery{Types: []string{event.TypeCrashDetected}})
	if err != nil || len(evs) != 1 || !strings.Contains(string(evs[0].Payload), pid) {
		t.Errorf("Events(crash_detected) after the child died = %v, %v; want one naming pid %s", evs, err, pid)
	}
}

// TestSecondRecorderInProcessRefused: the lock also holds between two
// recorders of one process.
func TestSecondRecorderInProcessRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	clk := newClock()
	mustOpen(t, baseConfig(t, dir, "", "w", clk))
	if r, err := Open(context.Background(), baseConfig(t, dir, "", "w", clk)); !errors.Is(err, ErrInUse) {
		if r != nil {
			r.Close()
		}
		t.Fatalf("second Open() error = %v, want ErrInUse", err)
	}
}

// TestLockChild is the worker process of TestSecondProcessRefused; it does
// nothing unless started by it.
func TestLockChild(t *testing.T) {
	recorderChild(t, "RECORDER_LOCK_CHILD", "twin", "TestSecondProcessRefused")
}
