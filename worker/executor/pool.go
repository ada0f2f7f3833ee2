package executor

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"time"

	"svc/worker"
)

// Pool runs tasks through executor processes, at most Size at once, in
// mode spawn (one process per attempt) or persistent (Size long-lived
// processes fed framed tasks). It is the worker's worker.TaskRunner and
// worker.PoolStats; both modes share the retry loop and the result rules.
//
// Run is safe for concurrent use. Each attempt takes a slot (spawn) or an
// idle child (persistent); callers that find none wait in arrival order
// until one frees up or their ctx ends. The slot is released while a retry
// backs off, so a task being retried never holds a process idle. Run has no
// ordering guarantee between tasks: callers that need per-key order must
// not start the next task of a key before the previous one returned.
type Pool struct {
	opts    Options
	backend execBackend
	guard   *execGuard
}

// execBackend runs single attempts for a Pool: the mode-specific part.
type execBackend interface {
	// attempt waits for a slot, calls started once it holds one, runs
	// attempt n of t and releases the slot. A non-nil error says no slot was
	// had because ctx ended (or the pool closed); nothing ran.
	attempt(ctx context.Context, t *worker.Task, n int, started func()) (worker.AttemptResult, error)
	busy() int
	waiting() int
	close()
}

var (
	_ worker.TaskRunner = (*Pool)(nil)
	_ worker.PoolStats  = (*Pool)(nil)
)

// NewPool validates opts and returns a pool of opts.Mode. It starts
// nothing: spawn mode spawns per attempt, persistent mode starts its
// children on the first Run. A missing or unusable binary is not an error
// here (it may be installed later; call Check at load to refuse it); each
// attempt then fails at once, unretried, naming executor.binary_path.
// Close stops a persistent pool's children.
func NewPool(opts Options) (*Pool, error) {
	s, err := NewSpawner(opts)
	if err != nil {
		return nil, err
	}
	p := &Pool{opts: s.opts, guard: s.guard}
	if s.opts.Mode == ModePersistent {
		if p.backend, err = newPersistent(s); err != nil {
			return nil, err
		}
	} else {
		p.backend = &spawnBackend{spawner: s, slots: make(chan struct{}, s.opts.PoolSize)}
	}
	return p, nil
}

// Size is the number of process slots (executor.pool_size).
func (p *Pool) Size() int { return p.opts.PoolSize }

// Busy is the number of slots in use now.
func (p *Pool) Busy() int { return p.backend.busy() }

// Waiting is the number of attempts waiting for a free slot.
func (p *Pool) Waiting() int { return p.backend.waiting() }

// Mode is the pool's executor mode (ModeSpawn or ModePersistent).
func (p *Pool) Mode() string { return p.opts.Mode }

// Close stops the pool: later Runs fail at once (mode persistent), the
// guard process (GuardBinary) ends, and in mode persistent
// every child gets EOF on stdin, SIGTERM after StopGrace and SIGKILL after
// as long again; Close returns once they are gone. Tasks still running keep
// their child until they end. Safe to call more than once.
func (p *Pool) Close() {
	p.backend.close()
	p.guard.close()
}

// Run runs t until an attempt is ok or MaxAttempts attempts were made; every
// non-ok attempt (failed, timeout, tempfail) is retried after a backoff,
// except one whose executor could not start (ErrStart), which ends the task
// at once. The result carries the last attempt's output, stderr, exit code,
// annotations and cache writes, the task labels merged with the last
// attempt's labels (the executor's win), and the wall time of all attempts.
// A last attempt that asked to retry ends as failed. When ctx ends first
// the status is failed and Err wraps ctx.Err(), so callers can tell a
// shutdown from an executor failure.
func (p *Pool) Run(ctx context.Context, t *worker.Task) worker.TaskResult {
	start := time.Now()
	res := worker.TaskResult{Task: t, Status: worker.StatusFailed, ExitCode: -1}
	var last *worker.AttemptResult
	tempfails := 0
	var stopErr error
	for attempt := 1; attempt <= p.opts.MaxAttempts; attempt++ {
		if attempt > 1 {
			if stopErr = execSleep(ctx, p.backoff(attempt-1)); stopErr != nil {
				break
			}
		}
		started := func() {
			if p.opts.OnAttempt != nil {
				p.opts.OnAttempt(t, attempt, nil)
			}
		}
		var a worker.AttemptResult
		if a, stopErr = p.backend.attempt(ctx, t, attempt, started); stopErr != nil {
			break
		}
		last, res.Attempts = &a, attempt
		if p.opts.OnAttempt != nil {
			p.opts.OnAttempt(t, attempt, last)
		}
		if a.Status == worker.StatusTempFail {
			tempfails++
		}
		if a.Status == worker.StatusOK || ctx.Err() != nil || errors.Is(a.Err, ErrStart) {
			break
		}
	}
	res.Duration = time.Since(start)
	res.Labels = execMergeLabels(t.Labels, nil)
	if last != nil {
		res.Status, res.Err = last.Status, last.Err
		res.Output, res.OutputTruncated, res.Stderr = last.Output, last.OutputTruncated, last.Stderr
		res.ExitCode, res.Annotations, res.CacheWrites = last.ExitCode, last.Annotations, last.CacheWrites
		res.Labels = execMergeLabels(t.Labels, last.Labels)
	}
	switch {
	case stopErr != nil:
		res.Status, res.Err = worker.StatusFailed, fmt.Errorf("wait for executor: %w", stopErr)
	case res.Status == worker.StatusTempFail && p.opts.Mode == ModePersistent:
		res.Status = worker.StatusFailed
		res.Err = fmt.Errorf("executor asked to retry (status retry) %d times", tempfails)
	case res.Status == worker.StatusTempFail:
		res.Status = worker.StatusFailed
		res.Err = fmt.Errorf("executor asked to retry (exit 75) %d times", tempfails)
	}
	return res
}

// spawnBackend is mode spawn: a channel semaphore of PoolSize slots, one
// process per attempt.
type spawnBackend struct {
	spawner *Spawner
	slots   chan struct{}
	nwait   atomic.Int64
}

func (b *spawnBackend) attempt(ctx context.Context, t *worker.Task, n int, started func()) (worker.AttemptResult, error) {
	if err := b.acquire(ctx); err != nil {
		return worker.AttemptResult{}, err
	}
	started()
	a := b.spawner.SpawnAttempt(ctx, t, n)
	<-b.slots
	return a, nil
}

func (b *spawnBackend) busy() int    { return len(b.slots) }
func (b *spawnBackend) waiting() int { return int(b.nwait.Load()) }
func (b *spawnBackend) close()       {}

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
// capped, with "equal jitter" (a uniform draw in [d/2, d)) so that tasks
// failing together do not retry together.
func (p *Pool) backoff(n int) time.Duration {
	base := p.opts.RetryBackoff
	if base <= 0 {
		return 0
	}
	limit := max(base, execMaxRetryBackoff)
	d := limit
	if n <= 30 {
		if x := base << (n - 1); x > 0 && x < limit {
			d = x
		}
	}
	half := d / 2
	return half + rand.N(d-half)
}

// execSleep waits d or until ctx ends.
func execSleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// execMergeLabels returns a new map with base overlaid by extra.
func execMergeLabels(base, extra map[string]string) map[string]string {
	if len(base)+len(extra) == 0 {
		return nil
	}
	m := make(map[string]string, len(base)+len(extra))
	for k, v := range base {
		m[k] = v
	}
	for k, v := range extra {
		m[k] = v
	}
	return m
}

// execEnvOK reports whether k=v can be put in a process environment.
func execEnvOK(k, v string) bool {
	return k != "" && !strings.ContainsAny(k, "=\x00") && !strings.ContainsRune(v, 0)
}
