package executor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"svc/worker/model"
)

// Restart reasons (the reason label of svc_executor_restarts_total).
const (
	reasonStartFailed = "start_failed" // the binary could not be started
	reasonNotReady    = "not_ready"    // no ready frame (exit, garbage or ready_timeout)
	reasonKilled      = "killed"       // killed by a signal from outside before its ready frame
	reasonExited      = "exited"       // the process ended by itself
	reasonTimeout     = "timeout"      // a task ran over executor.timeout
	reasonCanceled    = "canceled"     // a task's context ended
	reasonProtocol    = "protocol"     // a malformed frame
	reasonOversized   = "oversized"    // a result over executor.max_output_bytes
	reasonRecycled    = "recycled"     // executor.max_tasks_per_child reached
	reasonStopped     = "stopped"      // the pool closed
)

var restartReasons = []string{
	reasonStartFailed, reasonNotReady, reasonKilled, reasonExited, reasonTimeout, reasonCanceled,
	reasonProtocol, reasonOversized, reasonRecycled,
}

// Protocol violations past the ready frame (the kind label of
// svc_executor_protocol_violations_total); each one replaces the child.
const (
	violationUnsolicited = "unsolicited_output" // stdout output while the child had no task
	violationWrongTask   = "wrong_task"         // a result not naming its task's task_id and attempt
	violationMalformed   = "malformed_frame"    // a reply that is not a well-formed result frame
)

var violationKinds = []string{violationUnsolicited, violationWrongTask, violationMalformed}

// runEnd says what a run means for the attempt it is part of.
type runEnd uint8

const (
	runAnswered runEnd = iota // res is the attempt's result
	runUnread                 // the child died before it read the task frame: re-run at no cost
	runStray                  // the child's output from before this task, provably not its answer: re-run at no cost
	runSuspect                // text in place of the result from a child that answered before: likely stray, one re-run at no cost
)

// violation is a protocol violation a run saw ("" kind: none).
type violation struct {
	kind   string
	detail string // what was wrong, never payload or result bytes
	after  bool   // seen after the task's result, which the task keeps
}

// Crash-loop backoff (crashBackoff); crashLoopAfter consecutive start-up
// deaths make a crash loop.
const (
	crashBackoffBase = 100 * time.Millisecond
	crashBackoffMax  = 10 * time.Second
	crashLoopAfter   = 3
)

// errPoolClosed ends attempts that arrive after Close.
var errPoolClosed = errors.New("executor pool closed")

// persistent is mode persistent: PoolSize seats, each keeping one child
// alive, and the tasks that wait for an idle child in arrival order. A
// child that gets ready while the executor is unavailable, or in a crash
// loop, is on probation: it serves, but the executor is not available
// again until it answers a task or lives probation.
type persistent struct {
	sp      *Spawner
	opts    Options
	log     *slog.Logger
	metrics *metrics
	ctx     context.Context // ends with close
	stop    context.CancelFunc
	seats   sync.WaitGroup
	changed func() // the health may have changed (called outside mu)

	mu         sync.Mutex
	started    bool
	closed     bool
	idle       []*child
	waiters    []*waiter
	busyN      int
	live       int    // children ready and not down
	probation  int    // live children on probation
	everReady  bool   // a child was ready once
	starting   int    // seats starting a child now
	fresh      int    // of them, seats whose last child did not fail
	startErr   error  // the last start-up failure, nil once a trusted child is ready
	startCause string // startErr, short and without the child's output
	looping    int    // seats in a crash loop
	waitCount  atomic.Int64
}

// waiter is a task waiting for an idle child.
type waiter struct {
	done     chan struct{} // closed once c or err is set
	c        *child
	err      error
	failFast bool // ends with the unavailable error rather than wait for the executor
}

func newPersistent(s *Spawner, changed func()) (*persistent, error) {
	m, err := newExecMetrics(s.opts.Registerer)
	if err != nil {
		return nil, err
	}
	p := &persistent{sp: s, opts: s.opts, log: s.log, metrics: m, changed: changed}
	p.ctx, p.stop = context.WithCancel(context.Background())
	m.ready.Set(0)
	return p, nil
}

func (p *persistent) busy() int    { p.mu.Lock(); defer p.mu.Unlock(); return p.busyN }
func (p *persistent) waiting() int { return int(p.waitCount.Load()) }

// start starts the seats (once): each starts its child now.
func (p *persistent) start() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.closed {
		p.startLocked()
	}
}

func (p *persistent) startLocked() {
	if p.started {
		return
	}
	p.started = true
	for range p.opts.PoolSize {
		p.seats.Add(1)
		go p.seat()
	}
	p.starting, p.fresh = p.opts.PoolSize, p.opts.PoolSize
}

func (p *persistent) status() model.ExecutorHealth {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.unavailableLocked():
		return model.ExecutorHealth{State: model.ExecutorUnavailable, Reason: p.startCause, Detail: p.startErr.Error()}
	case p.live == 0 && !p.everReady:
		return model.ExecutorHealth{State: model.ExecutorStarting, Reason: "starting: no executor child is ready yet"}
	}
	return model.ExecutorHealth{State: model.ExecutorAvailable}
}

// unavailableLocked: the last start-up failed, no trusted child is alive,
// and no seat whose children did not fail is starting one.
func (p *persistent) unavailableLocked() bool {
	return p.startErr != nil && p.live-p.probation <= 0 && p.fresh == 0
}

// failFastLocked ends the tasks that do not wait for an unavailable
// executor, when it is.
func (p *persistent) failFastLocked() {
	if p.unavailableLocked() {
		p.endWaitersLocked(unavailable(p.startErr), false)
	}
}

// endWaitersLocked ends the waiting tasks that fail fast, or all, with err.
func (p *persistent) endWaitersLocked(err error, all bool) {
	kept := p.waiters[:0]
	for _, w := range p.waiters {
		if all || w.failFast {
			w.err = err
			close(w.done)
			p.waitCount.Add(-1)
			continue
		}
		kept = append(kept, w)
	}
	clear(p.waiters[len(kept):])
	p.waiters = kept
}

// trustLocked ends c's probation: the executor works again.
func (p *persistent) trustLocked(c *child) bool {
	if !c.probation {
		return false
	}
	c.probation = false
	p.probation--
	if !c.down {
		p.startErr, p.startCause = nil, ""
	}
	return true
}

// frames holds task frame buffers between attempts, up to keptFrameBytes.
var frames = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

const keptFrameBytes = 256 << 10

// unnamed numbers the tasks that came without an id.
var unnamed atomic.Uint64

// attempt runs attempt n of t on an idle child. A child found dead before
// it read the task frame, or one whose stray output came before the task,
// costs no attempt: the task moves to another child, at most PoolSize
// times (text that may be stray, once; a dead child any number of times
// under a waiting policy).
func (p *persistent) attempt(ctx context.Context, t *model.Task, n int, started func(), pol waitPolicy) (model.AttemptResult, error) {
	fb := frames.Get().(*[]byte)
	defer func() {
		if cap(*fb) <= keptFrameBytes {
			frames.Put(fb)
		}
	}()
	if t.ID == "" {
		// A result proves its task by naming its task_id.
		named := *t
		named.ID = "svc-unnamed-" + strconv.FormatUint(unnamed.Add(1), 10)
		t = &named
	}
	frame, err := encodeTask((*fb)[:0], t, n)
	*fb = frame[:0]
	if err != nil {
		started()
		return failed(err), nil
	}
	begun := false
	spare, suspectSpare := p.opts.PoolSize, true
	for {
		c, err := p.acquire(ctx, &pol)
		if err != nil {
			return model.AttemptResult{}, err
		}
		if !begun {
			started()
			begun = true
		}
		res, end, v := p.run(ctx, c, t, n, frame)
		rerun := false
		switch end {
		case runUnread:
			rerun = spare > 0 || pol.wait
		case runStray:
			rerun = spare > 0
		case runSuspect:
			rerun = spare > 0 && suspectSpare
			suspectSpare = false
		}
		rerun = rerun && ctx.Err() == nil
		if v.kind != "" {
			p.violation(c, t, n, v, rerun)
		}
		if rerun {
			spare--
			continue
		}
		return res, nil
	}
}

// violation logs and counts a protocol violation of c seen by attempt n
// of t; rerun: the task moves to another child at no cost.
func (p *persistent) violation(c *child, t *model.Task, n int, v violation, rerun bool) {
	p.metrics.violations.WithLabelValues(v.kind).Inc()
	task := "attempt_failed" // the attempt failed and counts
	switch {
	case v.after:
		task = "answered"
	case rerun:
		task = "rerun"
	}
	p.log.Warn("executor_child_protocol_violation", "kind", v.kind, "pid", c.cmd.Process.Pid,
		"task_id", t.ID, "attempt", n, "task", task, "detail", v.detail)
}

// acquire takes an idle child, waiting in line for one. It fails with
// ctx's error, errPoolClosed, or, unless pol waits, the unavailable error
// when the executor is or becomes unavailable.
func (p *persistent) acquire(ctx context.Context, pol *waitPolicy) (*child, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, errPoolClosed
	}
	p.startLocked()
	if n := len(p.idle); n > 0 {
		c := p.idle[n-1]
		p.idle = p.idle[:n-1]
		p.takeLocked(c)
		p.mu.Unlock()
		return c, nil
	}
	if !pol.wait && p.unavailableLocked() {
		err := unavailable(p.startErr)
		p.mu.Unlock()
		return nil, err
	}
	w := &waiter{done: make(chan struct{}), failFast: !pol.wait}
	p.waiters = append(p.waiters, w)
	p.waitCount.Add(1)
	p.mu.Unlock()

	for wait := true; wait; {
		select {
		case <-w.done:
			return w.c, w.err
		case <-ctx.Done():
			wait = false
		case <-pol.stop: // an available executor still serves it in turn
			pol.wait, pol.stop = false, nil
			p.mu.Lock()
			w.failFast = true
			p.failFastLocked()
			p.mu.Unlock()
		}
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
		p.waiters = slices.DeleteFunc(p.waiters, func(x *waiter) bool { return x == w })
		p.waitCount.Add(-1)
	}
	return nil, ctx.Err()
}

// takeLocked marks c as held by a task.
func (p *persistent) takeLocked(c *child) {
	c.busy = true
	c.served++
	p.busyN++
}

// handLocked gives an idle, live child to the first waiter, else parks it.
func (p *persistent) handLocked(c *child) {
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

// markDownLocked takes c out of service with the first reason given.
func (p *persistent) markDownLocked(c *child, why string) {
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
		if c.probation {
			c.probation = false
			p.probation--
		}
		p.metrics.ready.Set(float64(p.live))
	}
	close(c.downCh)
}

// markDown takes c out of service and kills it.
func (p *persistent) markDown(c *child, why string) {
	p.mu.Lock()
	p.markDownLocked(c, why)
	p.mu.Unlock()
	c.kill()
}

// reaped is called once c's process is gone: its pipes close now, or when
// its holder lets go.
func (p *persistent) reaped(c *child) {
	p.mu.Lock()
	p.markDownLocked(c, reasonExited)
	hold := c.busy
	c.closePend = hold
	p.mu.Unlock()
	if !hold {
		c.closePipes()
	}
}

// release returns c after a task; broken is the restart reason of a child
// found unusable, "" when it answered.
func (p *persistent) release(c *child, broken string) {
	var retire, loopEnded, trusted bool
	p.mu.Lock()
	c.busy = false
	p.busyN--
	if broken == "" {
		c.answered++
		if c.inLoop {
			c.inLoop = false
			loopEnded = p.loopEndLocked()
		}
		trusted = c.probation && p.trustLocked(c)
	}
	switch {
	case broken != "":
		p.markDownLocked(c, broken)
	case c.down:
	case p.closed:
		p.markDownLocked(c, reasonStopped) // its seat retires it
	case p.opts.MaxTasksPerChild > 0 && c.served >= p.opts.MaxTasksPerChild:
		p.markDownLocked(c, reasonRecycled)
		retire = true
	default:
		p.handLocked(c)
	}
	closePipes := c.closePend
	p.mu.Unlock()
	if trusted {
		p.changed()
	}
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

// run sends the task frame of attempt n of t to c and reads the result,
// taken only when it is provably the answer: stdout held nothing before the
// frame was sent, and the result names this task_id and attempt (sent to a
// child once each). v is the violation seen, if any (c is then replaced).
func (p *persistent) run(ctx context.Context, c *child, t *model.Task, n int, frame []byte) (res model.AttemptResult, end runEnd, v violation) {
	start := time.Now()
	defer func() { res.Duration = time.Since(start) }()
	res.ExitCode = -1
	// One poll says whether stdout or stderr holds anything to read.
	outWaiting, errWaiting := c.quiet()
	if sn, text := c.stray(outWaiting); sn > 0 {
		v = violation{kind: violationUnsolicited, detail: strayText(sn, text) + " on stdout before the task was sent"}
		res.Status, res.Err = model.StatusFailed, violationError("wrote to stdout while it had no task")
		p.markDown(c, reasonProtocol)
		p.release(c, reasonProtocol)
		return res, runStray, v
	}
	if errWaiting { // stderr between tasks belongs to none
		_ = c.stderr.take()
	} else {
		c.stderr.discard()
	}
	if c.watch.p == nil {
		c.watch.p, c.watch.c = p, c
	}
	c.watch.arm(ctx, p.opts.Timeout)
	wrote, werr := c.stdin.Write(frame)
	var header, body []byte
	rerr := werr
	if werr == nil {
		header, body, rerr = readFrame(c.r, p.opts.MaxOutputBytes)
	}
	why := c.watch.disarm()
	var broken string
	if rerr == nil {
		echo, err := parseResult(header, &res)
		switch {
		case err != nil:
			rerr = err
		case echo.namesOther(t.ID, n):
			v = violation{kind: violationWrongTask, detail: fmt.Sprintf("the result names task_id %q attempt %d; sent attempt %d of task_id %q",
				capText(echo.taskID), echo.attempt, n, capText(t.ID))}
			res = model.AttemptResult{Status: model.StatusFailed, ExitCode: -1, Err: violationError("answered another task")}
			end, broken = runStray, reasonProtocol
		case echo.taskID == "" || echo.attempt == 0:
			// Maybe a late frame of an earlier task: never taken. From a
			// child that answered before it is stray; else the executor
			// does not echo and the attempt fails.
			v = violation{kind: violationWrongTask, detail: "the result names no " + echo.missing() +
				"; protocol v2 requires the task frame's task_id and attempt in every result"}
			res = model.AttemptResult{Status: model.StatusFailed, ExitCode: -1,
				Err: violationError("answered without the task_id and attempt of its task (protocol v2 requires them in every result)")}
			broken = reasonProtocol
			if c.answered > 0 {
				end = runStray
			}
		default:
			res.Output = body
			if sn, text := c.stray(false); sn > 0 {
				// The task keeps its answer; the child goes.
				v = violation{kind: violationUnsolicited, after: true, detail: strayText(sn, text) + " on stdout behind the result"}
				broken = reasonProtocol
			}
		}
	}
	if rerr != nil {
		broken = reasonProtocol
		switch r := why; {
		case r == reasonTimeout:
			res.Status, res.Err = model.StatusTimeout, fmt.Errorf("executor timed out after %s (executor.timeout)", p.opts.Timeout)
			broken = r
		case r == reasonCanceled:
			res.Status, res.Err = model.StatusFailed, fmt.Errorf("run executor: %w", ctx.Err())
			broken = r
		case errors.Is(rerr, errFrameTooLarge):
			res.Status, res.Err = model.StatusFailed, fmt.Errorf("%w (%d): %w", ErrOutputTooLarge, p.opts.MaxOutputBytes, rerr)
			res.Output, res.OutputTruncated, broken = body, true, reasonOversized
		case errors.Is(rerr, errFrameProtocol):
			res.Status, res.Err = model.StatusFailed, rerr
			v = violation{kind: violationMalformed, detail: malformedText(rerr)}
			if errors.Is(rerr, errFrameText) && c.answered > 0 {
				// Likely a print after its last result.
				end = runSuspect
			}
		default: // the child closed stdin or stdout: it is exiting
			if (werr != nil && wrote == 0) || (errors.Is(rerr, io.EOF) && unread(c.stdin) == len(frame)) {
				end = runUnread
			}
			c.awaitExit()
			res.Status, res.ExitCode, broken = model.StatusFailed, c.exitCode(), reasonExited
			where := "before answering"
			if errors.Is(rerr, io.ErrUnexpectedEOF) {
				where = "in the middle of its result frame"
			}
			res.Err = fmt.Errorf("executor exited %s (%s)", where, c.exitText())
		}
	}
	if broken != "" && broken != reasonExited {
		p.markDown(c, broken)
	}
	res.Stderr = c.stderr.take()
	p.release(c, broken)
	return res, end, v
}

// violationError is the error of an attempt whose child broke protocol.
func violationError(what string) error {
	return fmt.Errorf("%w: the executor %s (protocol violation); the child was replaced", errFrameProtocol, what)
}

// strayText describes stray stdout output without showing it.
func strayText(n int, text bool) string {
	what := "binary output (a frame?)"
	if text {
		what = "text (a print to stdout?)"
	}
	return fmt.Sprintf("at least %d bytes of %s", n, what)
}

// malformedText says, for the log, what was wrong with a result frame:
// header facts at most, never stray text or a body.
func malformedText(err error) string {
	if errors.Is(err, errFrameText) {
		return "text where a frame length prefix should be (a print to stdout, or protocol v1 output?)"
	}
	return capText(err.Error())
}

// capText cuts s to 200 bytes for a log line.
func capText(s string) string {
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}

// awaitExit waits briefly for a child that closed its pipes to exit by
// itself, then kills it.
func (c *child) awaitExit() {
	if after(ioGrace, c.exited) {
		c.kill()
		<-c.exited
	}
}
