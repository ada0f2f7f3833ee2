package executor

import (
	"context"
	"os/exec"
	"testing"
	"time"
)

// watchedChild is a sleeping process in its own group, as a child of the
// pool would be, and the watch of a pool around it.
func watchedChild(t *testing.T) (*child, *runWatch) {
	t.Helper()
	cmd := exec.Command("sleep", "30")
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, pgid: cmd.Process.Pid, downCh: make(chan struct{})}
	t.Cleanup(func() { c.kill(); _ = cmd.Wait() })
	p := &persistent{metrics: nil}
	c.watch.p, c.watch.c = p, c
	return c, &c.watch
}

// dead waits up to 5 s for c's process to end.
func dead(t *testing.T, c *child) bool {
	t.Helper()
	done := make(chan struct{})
	go func() { _ = c.cmd.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(5 * time.Second):
		return false
	}
}

// TestRunWatchStopsOnTimeoutOnly: a task past its timeout is stopped (the
// child killed, the reason "timeout"); a late timer call for an earlier
// task, arriving while the next one runs, stops nothing.
func TestRunWatchStopsOnTimeoutOnly(t *testing.T) {
	c, w := watchedChild(t)
	w.arm(context.Background(), time.Hour)
	w.onTimeout() // as if the previous task's timer fired late
	if why := w.disarm(); why != "" {
		t.Fatalf("a stale timer call stopped the task: %q", why)
	}
	w.arm(context.Background(), 20*time.Millisecond)
	if !dead(t, c) {
		t.Fatal("the child still runs 5 s after its task's 20 ms timeout")
	}
	if why := w.disarm(); why != reasonTimeout {
		t.Fatalf("stop reason = %q, want %q", why, reasonTimeout)
	}
	if !c.down || c.downWhy != reasonTimeout {
		t.Errorf("child down = %v (%q), want down for timeout", c.down, c.downWhy)
	}
}

// TestRunWatchStopsOnCancel: the context's end stops the armed task; a
// context that ended between two tasks (its watch fired while none was
// armed) stops the next task at once.
func TestRunWatchStopsOnCancel(t *testing.T) {
	c, w := watchedChild(t)
	ctx, cancel := context.WithCancel(context.Background())
	w.arm(ctx, time.Hour)
	if why := w.disarm(); why != "" {
		t.Fatalf("stopped without cause: %q", why)
	}
	cancel()
	time.Sleep(20 * time.Millisecond) // the watch fires with nothing armed
	w.arm(ctx, time.Hour)
	if why := w.disarm(); why != reasonCanceled {
		t.Fatalf("task armed under an ended context: stop reason %q, want %q", why, reasonCanceled)
	}
	if !dead(t, c) {
		t.Fatal("the child still runs after its task's context ended")
	}

	c2, w2 := watchedChild(t)
	ctx2, cancel2 := context.WithCancel(context.Background())
	w2.arm(ctx2, time.Hour)
	cancel2()
	if !dead(t, c2) {
		t.Fatal("the armed task's child still runs after its context ended")
	}
	if why := w2.disarm(); why != reasonCanceled {
		t.Fatalf("stop reason = %q, want %q", why, reasonCanceled)
	}
	w2.release()
}
