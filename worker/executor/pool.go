package executor

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"svc/worker/model"
)

// Pool runs tasks through executor processes, at most Size at once, in
// mode spawn or persistent; both modes share the retry loop and result
// rules. Run is safe for concurrent use: each attempt takes a slot (spawn)
// or an idle child (persistent), waiting in arrival order, and lets it go
// while a retry backs off. Run orders nothing between tasks: callers that
// need per-key order wait for a key's task before starting its next.
type Pool struct {
	opts    Options
	backend backend
	guard   *guard
	health  *health
}

// backend runs single attempts for a Pool: the mode-specific part.
type backend interface {
	// attempt waits for a slot, calls started once it holds one, runs
	// attempt n of t and releases the slot. A non-nil error says nothing
	// ran: ctx ended, the pool closed, or the executor is unavailable and
	// pol does not wait.
	attempt(ctx context.Context, t *model.Task, n int, started func(), pol waitPolicy) (model.AttemptResult, error)
	busy() int
	waiting() int
	start() // starts what runs ahead of tasks (persistent children)
	status() model.ExecutorHealth
	close()
}

var (
	_ model.TaskRunner           = (*Pool)(nil)
	_ model.PoolStats            = (*Pool)(nil)
	_ model.ExecutorHealthSource = (*Pool)(nil)
)

// NewPool validates opts and returns a pool of opts.Mode. It starts
// nothing (see Start). A missing or unusable binary is not an error here:
// the executor is then unavailable (see Run).
func NewPool(opts Options) (*Pool, error) {
	s, err := NewSpawner(opts)
	if err != nil {
		return nil, err
	}
	p := &Pool{opts: s.opts, guard: s.guard}
	if p.health, err = newExecHealth(s.opts.Registerer, s.log, s.opts.Mode); err != nil {
		return nil, err
	}
	if s.opts.Mode == ModePersistent {
		if p.backend, err = newPersistent(s, p.health.refresh); err != nil {
			return nil, err
		}
	} else {
		p.backend = newSpawnBackend(s, p.health.refresh)
	}
	p.health.bind(p.backend.status)
	return p, nil
}

// Start starts a persistent pool's children ahead of the first task (else
// the first Run does). Idempotent; nothing to do in mode spawn.
func (p *Pool) Start() { p.backend.start() }

// ExecutorHealth is the executor's health now.
func (p *Pool) ExecutorHealth() model.ExecutorHealth { return p.health.status() }

// WatchExecutorHealth calls f with the health now and on every change (see
// model.ExecutorHealthSource).
func (p *Pool) WatchExecutorHealth(f func(model.ExecutorHealth)) { p.health.watch(f) }

// Size is the number of process slots (executor.pool_size).
func (p *Pool) Size() int { return p.opts.PoolSize }

// Busy is the number of slots in use now.
func (p *Pool) Busy() int { return p.backend.busy() }

// Waiting is the number of attempts waiting for a free slot.
func (p *Pool) Waiting() int { return p.backend.waiting() }

// Mode is the pool's executor mode (ModeSpawn or ModePersistent).
func (p *Pool) Mode() string { return p.opts.Mode }

// Close stops the pool and the guard process. In mode persistent later
// Runs fail at once and every idle child is retired (Options.StopGrace);
// Close returns once all are gone, running tasks keep theirs until they
// end. Safe to call more than once.
func (p *Pool) Close() {
	p.backend.close()
	p.guard.close()
}

// Run runs t until an attempt is ok or MaxAttempts attempts were made,
// retrying every other after a backoff. The result is the last attempt's,
// with the task labels merged under the executor's and the wall time of
// all attempts; a last tempfail ends as failed. When ctx ends first the
// status is failed and Err wraps ctx.Err().
//
// An executor that cannot be started costs no attempt: under a ctx marked
// by model.WaitForExecutor the task waits for it, else it fails at once
// with an Err wrapping model.ErrExecutorUnavailable and the start error.
func (p *Pool) Run(ctx context.Context, t *model.Task) model.TaskResult {
	start := time.Now()
	res := model.TaskResult{Task: t, Status: model.StatusFailed, ExitCode: -1}
	var last *model.AttemptResult
	tempfails := 0
	var stopErr error
	var pol waitPolicy
	pol.wait, pol.stop = model.ExecutorWait(ctx)
	for attempt := 1; attempt <= p.opts.MaxAttempts; attempt++ {
		if attempt > 1 && !after(p.backoff(attempt-1), ctx.Done()) {
			stopErr = ctx.Err()
			break
		}
		started := func() { p.opts.OnAttempt(t, attempt, nil) }
		var a model.AttemptResult
		if a, stopErr = p.backend.attempt(ctx, t, attempt, started, pol); stopErr != nil {
			break
		}
		last, res.Attempts = &a, attempt
		p.opts.OnAttempt(t, attempt, last)
		if a.Status == model.StatusTempFail {
			tempfails++
		}
		if a.Status == model.StatusOK || ctx.Err() != nil || errors.Is(a.Err, ErrStart) {
			break
		}
	}
	res.Duration = time.Since(start)
	var got map[string]string // labels the executor set
	if last != nil {
		res.Status, res.Err = last.Status, last.Err
		res.Output, res.OutputTruncated, res.Stderr = last.Output, last.OutputTruncated, last.Stderr
		res.ExitCode, res.Annotations, res.CacheWrites = last.ExitCode, last.Annotations, last.CacheWrites
		got = last.Labels
	}
	res.Labels = mergeLabels(t.Labels, got)
	switch {
	case errors.Is(stopErr, model.ErrExecutorUnavailable):
		res.Status, res.Err = model.StatusFailed, stopErr
	case stopErr != nil:
		res.Status, res.Err = model.StatusFailed, fmt.Errorf("wait for executor: %w", stopErr)
	case res.Status == model.StatusTempFail && p.opts.Mode == ModePersistent:
		res.Status = model.StatusFailed
		res.Err = fmt.Errorf("executor asked to retry (status retry) %d times", tempfails)
	case res.Status == model.StatusTempFail:
		res.Status = model.StatusFailed
		res.Err = fmt.Errorf("executor asked to retry (exit 75) %d times", tempfails)
	}
	return res
}

// spawnBackend is mode spawn: a channel semaphore of PoolSize slots, one
// process per attempt. A start that fails for want of a runnable binary
// makes the executor unavailable: attempts wait at a gate (or fail) while
// recheck looks at the binary; the first process that starts proves it.
type spawnBackend struct {
	spawner  *Spawner
	slots    chan struct{}
	nwait    atomic.Int64
	changed  func() // the health may have changed
	down     atomic.Bool
	unproven atomic.Int64 // re-checks since a process last started (their backoff)

	mu       sync.Mutex
	downErr  error         // the start error while unavailable
	retry    chan struct{} // closed when gated attempts should look again
	checking bool          // the re-check loop runs
	closed   bool
	stop     chan struct{} // closed by close
}

func newSpawnBackend(s *Spawner, changed func()) *spawnBackend {
	return &spawnBackend{spawner: s, slots: make(chan struct{}, s.opts.PoolSize), changed: changed,
		retry: make(chan struct{}), stop: make(chan struct{})}
}

func (b *spawnBackend) attempt(ctx context.Context, t *model.Task, n int, started func(), pol waitPolicy) (model.AttemptResult, error) {
	for {
		if err := b.gate(ctx, &pol); err != nil {
			return model.AttemptResult{}, err
		}
		if err := b.acquire(ctx); err != nil {
			return model.AttemptResult{}, err
		}
		began, at := false, time.Now()
		a := b.spawner.spawn(ctx, t, n, func() {
			began = true
			b.up()
			started()
		})
		a.Duration = time.Since(at)
		<-b.slots
		if began {
			return a, nil
		}
		if errors.Is(a.Err, ErrStart) && !messageStartError(a.Err) {
			// Not an attempt: the gate decides what comes next.
			if !b.markDown(a.Err) {
				return model.AttemptResult{}, unavailable(a.Err) // closed: no re-check runs
			}
			continue
		}
		started() // nothing ran (ctx ended, no pipes, E2BIG): the attempt counts
		return a, nil
	}
}

func (b *spawnBackend) busy() int    { return len(b.slots) }
func (b *spawnBackend) waiting() int { return int(b.nwait.Load()) }
func (b *spawnBackend) start()       {}

func (b *spawnBackend) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.closed {
		b.closed = true
		close(b.stop)
	}
}

func (b *spawnBackend) status() model.ExecutorHealth {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.downErr == nil {
		return model.ExecutorHealth{State: model.ExecutorAvailable}
	}
	return model.ExecutorHealth{State: model.ExecutorUnavailable, Reason: startCause(b.downErr), Detail: b.downErr.Error()}
}

// gate lets an attempt through while the executor is available; else it
// waits for the re-check (pol.wait, until pol.stop) or fails.
func (b *spawnBackend) gate(ctx context.Context, pol *waitPolicy) error {
	if !b.down.Load() {
		return nil
	}
	b.nwait.Add(1)
	defer b.nwait.Add(-1)
	for {
		b.mu.Lock()
		down, retry, closed := b.downErr, b.retry, b.closed
		b.mu.Unlock()
		switch {
		case down == nil:
			return nil
		case closed:
			return errPoolClosed
		case !pol.wait:
			return unavailable(down)
		}
		select {
		case <-retry:
		case <-ctx.Done():
			return ctx.Err()
		case <-pol.stop:
			pol.wait, pol.stop = false, nil
		case <-b.stop:
		}
	}
}

// markDown makes the executor unavailable after a start failed for err
// and starts recheck; false when the pool is closed.
func (b *spawnBackend) markDown(err error) bool {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return false
	}
	b.downErr = err
	b.down.Store(true)
	if !b.checking {
		b.checking = true
		go b.recheck()
	}
	b.mu.Unlock()
	b.changed()
	return true
}

// up notes a process that started: the executor works.
func (b *spawnBackend) up() {
	if b.unproven.Load() != 0 {
		b.unproven.Store(0)
	}
	if !b.down.Load() {
		return
	}
	b.mu.Lock()
	was := b.downErr != nil
	b.upLocked()
	b.mu.Unlock()
	if was {
		b.changed()
	}
}

// upLocked ends an unavailable episode and wakes the gated attempts.
func (b *spawnBackend) upLocked() {
	if b.downErr == nil {
		return
	}
	b.downErr = nil
	b.down.Store(false)
	close(b.retry)
	b.retry = make(chan struct{})
}

// recheck looks at the binary (exec.LookPath, never running it) with
// backoff until it looks startable, then lets the gated attempts try. The
// backoff grows over episodes until a process actually starts (a binary
// may pass the check and still not run, such as one of another arch).
func (b *spawnBackend) recheck() {
	for {
		if !after(backoffAt(recheckBase, recheckMax, int(b.unproven.Add(1)-1)), b.stop) {
			return
		}
		b.mu.Lock()
		if b.downErr == nil { // a process started meanwhile
			b.checking = false
			b.mu.Unlock()
			return
		}
		b.mu.Unlock()
		if _, err := exec.LookPath(b.spawner.opts.BinaryPath); err != nil {
			continue
		}
		b.mu.Lock()
		b.checking = false
		b.upLocked()
		b.mu.Unlock()
		b.changed()
		return
	}
}

// acquire takes a slot, waiting in line when none is free.
func (b *spawnBackend) acquire(ctx context.Context) error {
	select {
	case b.slots <- struct{}{}:
		return nil
	default:
	}
	b.nwait.Add(1)
	defer b.nwait.Add(-1)
	select {
	case b.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// backoff is the delay before retry n (1-based): RetryBackoff·2^(n-1),
// capped, with equal jitter (uniform in [d/2, d)).
func (p *Pool) backoff(n int) time.Duration {
	base := p.opts.RetryBackoff
	if base <= 0 {
		return 0
	}
	limit := max(base, maxRetryBackoff)
	d := limit
	if n <= 30 {
		if x := base << (n - 1); x > 0 && x < limit {
			d = x
		}
	}
	half := d / 2
	return half + rand.N(d-half)
}

// after waits d; false when done closed first (at once for d <= 0).
func after(d time.Duration, done <-chan struct{}) bool {
	if d <= 0 {
		select {
		case <-done:
			return false
		default:
			return true
		}
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-done:
		return false
	}
}

// mergeLabels returns a new map with base overlaid by extra.
func mergeLabels(base, extra map[string]string) map[string]string {
	if len(base)+len(extra) == 0 {
		return nil
	}
	m := make(map[string]string, len(base)+len(extra))
	maps.Copy(m, base)
	maps.Copy(m, extra)
	return m
}

// envOK reports whether k=v can be put in a process environment.
func envOK(k, v string) bool {
	return k != "" && !strings.ContainsAny(k, "=\x00") && !strings.ContainsRune(v, 0)
}
