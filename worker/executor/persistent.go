package executor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"svc/worker"
)

// Restart reasons of persistent children (the reason label of
// svc_executor_restarts_total).
const (
	execReasonStartFailed = "start_failed" // the binary could not be started
	execReasonNotReady    = "not_ready"    // no ready frame (exit, garbage or ready_timeout)
	execReasonKilled      = "killed"       // killed by a signal from outside before its ready frame
	execReasonExited      = "exited"       // the process ended by itself
	execReasonTimeout     = "timeout"      // a task ran over executor.timeout
	execReasonCanceled    = "canceled"     // a task's context ended
	execReasonProtocol    = "protocol"     // a malformed frame
	execReasonOversized   = "oversized"    // a result over executor.max_output_bytes
	execReasonRecycled    = "recycled"     // executor.max_tasks_per_child reached
	execReasonStopped     = "stopped"      // the pool closed
)

var execRestartReasons = []string{
	execReasonStartFailed, execReasonNotReady, execReasonKilled, execReasonExited, execReasonTimeout, execReasonCanceled,
	execReasonProtocol, execReasonOversized, execReasonRecycled,
}

// Crash-loop backoff: a seat whose children die before answering a task
// waits base·2^(n-2) (capped) before start n; the first restart is at once.
const (
	execCrashBackoffBase = 100 * time.Millisecond
	execCrashBackoffMax  = 10 * time.Second
	// execCrashLoopAfter consecutive start-up deaths make a crash loop.
	execCrashLoopAfter = 3
)

// errPoolClosed ends attempts that arrive after Close.
var errPoolClosed = errors.New("executor pool closed")

// persistent is mode persistent: PoolSize seats, each keeping one child
// alive, and the tasks that wait for an idle child in arrival order.
type persistent struct {
	sp      *Spawner
	opts    Options
	log     *slog.Logger
	metrics *execMetrics
	stop    chan struct{} // closed by close
	seats   sync.WaitGroup

	mu        sync.Mutex
	started   bool
	closed    bool
	idle      []*execChild
	waiters   []*execWaiter
	busyN     int
	live      int   // children ready and not down
	starting  int   // seats starting a child now
	startErr  error // the last start-up failure, nil once a child is ready
	looping   int   // seats in a crash loop
	waitCount atomic.Int64
}

// execWaiter is a task waiting for an idle child.
type execWaiter struct {
	done chan struct{} // closed once c or err is set
	c    *execChild
	err  error
}

func newPersistent(s *Spawner) (*persistent, error) {
	m, err := newExecMetrics(s.opts.Registerer)
	if err != nil {
		return nil, err
	}
	p := &persistent{sp: s, opts: s.opts, log: s.log, metrics: m, stop: make(chan struct{})}
	m.ready.Set(0)
	return p, nil
}

func (p *persistent) busy() int    { p.mu.Lock(); defer p.mu.Unlock(); return p.busyN }
func (p *persistent) waiting() int { return int(p.waitCount.Load()) }

// attempt runs attempt n of t on an idle child. A child found dead before
// it read the task frame costs no attempt: the task moves to another.
func (p *persistent) attempt(ctx context.Context, t *worker.Task, n int, started func()) (worker.AttemptResult, error) {
	frame, err := execEncodeTask(t, n)
	if err != nil {
		started()
		return execFailed(err), nil
	}
	begun := false
	for try := 0; ; try++ {
		c, err := p.acquire(ctx)
		if err != nil {
			if !errors.Is(err, ErrStart) {
				return worker.AttemptResult{}, err
			}
			if !begun {
				started()
			}
			return execFailed(err), nil
		}
		if !begun {
			started()
			begun = true
		}
		res, unread := p.run(ctx, c, frame)
		if unread && try < p.opts.PoolSize && ctx.Err() == nil {
			continue
		}
		return res, nil
	}
}

// acquire takes an idle child, waiting in line for one. It fails with
// ctx's error, errPoolClosed, or the last start-up error (wrapping
// ErrStart) when no child is alive and none is starting.
func (p *persistent) acquire(ctx context.Context) (*execChild, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, errPoolClosed
	}
	if !p.started {
		p.started = true
		for range p.opts.PoolSize {
			p.seats.Add(1)
			go p.seat()
		}
		p.starting = p.opts.PoolSize
	}
	if n := len(p.idle); n > 0 {
		c := p.idle[n-1]
		p.idle = p.idle[:n-1]
		p.takeLocked(c)
		p.mu.Unlock()
		return c, nil
	}
	if err := p.startErr; err != nil && p.live == 0 && p.starting == 0 {
		p.mu.Unlock()
		return nil, err
	}
	w := &execWaiter{done: make(chan struct{})}
	p.waiters = append(p.waiters, w)
	p.waitCount.Add(1)
	p.mu.Unlock()

	select {
	case <-w.done:
		return w.c, w.err
	case <-ctx.Done():
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-w.done: // handed over meanwhile: give it back
		if c := w.c; c != nil {
			c.busy, c.served = false, c.served-1
			p.busyN--
			p.handLocked(c)
		}
	default:
		p.waiters = slices.DeleteFunc(p.waiters, func(x *execWaiter) bool { return x == w })
		p.waitCount.Add(-1)
	}
	return nil, ctx.Err()
}

// takeLocked marks c as held by a task.
func (p *persistent) takeLocked(c *execChild) {
	c.busy = true
	c.served++
	p.busyN++
}

// handLocked gives an idle, live child to the first waiter, else parks it.
func (p *persistent) handLocked(c *execChild) {
	if len(p.waiters) == 0 {
		p.idle = append(p.idle, c)
		return
	}
	w := p.waiters[0]
	p.waiters = p.waiters[1:]
	p.waitCount.Add(-1)
	p.takeLocked(c)
	w.c = c
	close(w.done)
}

// failWaitersLocked ends every waiting task with err.
func (p *persistent) failWaitersLocked(err error) {
	for _, w := range p.waiters {
		w.err = err
		close(w.done)
	}
	p.waitCount.Add(-int64(len(p.waiters)))
	p.waiters = nil
}

// markDownLocked takes c out of service with the first reason given.
func (p *persistent) markDownLocked(c *execChild, why string) {
	if c.down {
		return
	}
	c.down, c.downWhy = true, why
	if i := slices.Index(p.idle, c); i >= 0 {
		p.idle = slices.Delete(p.idle, i, i+1)
	}
	if c.live {
		c.live = false
		p.live--
		p.metrics.ready.Set(float64(p.live))
	}
	close(c.downCh)
}

// markDown is markDownLocked for callers without the lock.
func (p *persistent) markDown(c *execChild, why string) {
	p.mu.Lock()
	p.markDownLocked(c, why)
	p.mu.Unlock()
}

// reaped is called once c's process is gone: its pipes close now, or when
// its holder lets go.
func (p *persistent) reaped(c *execChild) {
	p.mu.Lock()
	p.markDownLocked(c, execReasonExited)
	hold := c.busy
	c.closePend = hold
	p.mu.Unlock()
	if !hold {
		c.closePipes()
	}
}

// release returns c after a task. broken is the restart reason when the
// task found the child unusable (it was killed), "" when it answered.
func (p *persistent) release(c *execChild, broken string) {
	var retire, loopEnded bool
	p.mu.Lock()
	c.busy = false
	p.busyN--
	if broken == "" {
		c.answered++
		if c.inLoop {
			c.inLoop = false
			loopEnded = p.loopEndLocked()
		}
	}
	switch {
	case broken != "":
		p.markDownLocked(c, broken)
	case c.down:
	case p.closed:
		p.markDownLocked(c, execReasonStopped) // its seat retires it
	case p.opts.MaxTasksPerChild > 0 && c.served >= p.opts.MaxTasksPerChild:
		p.markDownLocked(c, execReasonRecycled)
		retire = true
	default:
		p.handLocked(c)
	}
	closePipes := c.closePend
	p.mu.Unlock()
	if loopEnded {
		p.log.Info("executor_crash_loop_ended")
	}
	if closePipes {
		c.closePipes()
	}
	if retire {
		go c.retire(p.opts.StopGrace)
	}
}

// run sends one task frame to c and reads the result frame. unread says
// the child died without reading any of the frame (the task may go to
// another child at no cost).
func (p *persistent) run(ctx context.Context, c *execChild, frame []byte) (res worker.AttemptResult, unread bool) {
	start := time.Now()
	defer func() { res.Duration = time.Since(start) }()
	_ = c.stderr.take() // stderr between tasks belongs to none
	var why atomic.Value
	stop := func(reason string) {
		if why.CompareAndSwap(nil, reason) {
			p.markDown(c, reason)
			c.kill()
		}
	}
	timer := time.AfterFunc(p.opts.Timeout, func() { stop(execReasonTimeout) })
	unwatch := context.AfterFunc(ctx, func() { stop(execReasonCanceled) })
	wrote, werr := c.stdin.Write(frame)
	var header, body []byte
	rerr := werr
	if werr == nil {
		header, body, rerr = execReadFrame(c.r, p.opts.MaxOutputBytes)
	}
	timer.Stop()
	unwatch()
	res.ExitCode = -1
	var broken string
	if rerr == nil {
		if err := execParseResult(header, &res); err != nil {
			rerr = err
		} else {
			res.Output = body
		}
	}
	if rerr != nil {
		broken = execReasonProtocol
		switch r, _ := why.Load().(string); {
		case r == execReasonTimeout:
			res.Status, res.Err = worker.StatusTimeout, fmt.Errorf("executor timed out after %s (executor.timeout)", p.opts.Timeout)
			broken = r
		case r == execReasonCanceled:
			res.Status, res.Err = worker.StatusFailed, fmt.Errorf("run executor: %w", ctx.Err())
			broken = r
		case errors.Is(rerr, errFrameTooLarge):
			res.Status, res.Err = worker.StatusFailed, fmt.Errorf("%w (%d): %w", ErrOutputTooLarge, p.opts.MaxOutputBytes, rerr)
			res.Output, res.OutputTruncated, broken = body, true, execReasonOversized
		case errors.Is(rerr, errFrameProtocol):
			res.Status, res.Err = worker.StatusFailed, rerr
		default: // the child closed stdin or stdout: it is exiting
			unread = (werr != nil && wrote == 0) || (errors.Is(rerr, io.EOF) && execUnread(c.stdin) == len(frame))
			c.awaitExit()
			res.Status, res.ExitCode, broken = worker.StatusFailed, c.exitCode(), execReasonExited
			where := "before answering"
			if errors.Is(rerr, io.ErrUnexpectedEOF) {
				where = "in the middle of its result frame"
			}
			res.Err = fmt.Errorf("executor exited %s (%s)", where, c.exitText())
		}
		if broken != execReasonExited {
			p.markDown(c, broken)
			c.kill()
		}
	}
	res.Stderr = c.stderr.take()
	p.release(c, broken)
	return res, unread
}

// awaitExit waits briefly for a child that closed its pipes to exit by
// itself, then kills it.
func (c *execChild) awaitExit() {
	t := time.NewTimer(execIOGrace)
	defer t.Stop()
	select {
	case <-c.exited:
		return
	case <-t.C:
	}
	c.kill()
	<-c.exited
}
