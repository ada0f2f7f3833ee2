package executor

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	"svc/worker"
	"svc/worker/config"
)

// Executor defaults for zero Options fields.
const (
	execDefaultTimeout        = 30 * time.Second
	execDefaultMaxOutputBytes = 8 << 20
	execDefaultMaxAttempts    = 3
	execDefaultStderrTail     = 8 << 10
	// execMaxRetryBackoff caps the exponential backoff between attempts
	// (unless RetryBackoff itself is larger).
	execMaxRetryBackoff = 10 * time.Second
)

// Options configures the executor pool (mode spawn). Zero values take
// the defaults noted per field; negative values are rejected by NewPool.
type Options struct {
	BinaryPath     string            // executor.binary_path; a bare name is looked up in the worker's PATH
	Args           []string          // executor.args, after the binary in argv
	Env            map[string]string // executor.env, on top of the minimal base environment
	PoolSize       int               // executor.pool_size: concurrent processes (0: number of CPUs)
	Timeout        time.Duration     // executor.timeout, per attempt (0: 30s)
	MaxOutputBytes int64             // executor.max_output_bytes (0: 8 MiB); past it the attempt fails at once
	MaxAttempts    int               // handler.max_attempts (0: 3)
	// RetryBackoff is the base delay before a retry (handler.retry_backoff),
	// doubled per retry, jittered and capped at 10s; 0 retries at once.
	RetryBackoff time.Duration
	StderrTail   int          // stderr bytes kept, the last ones (0: 8 KiB)
	Logger       *slog.Logger // nil: discard; should already carry component=executor
	// OnAttempt, when set, is called from Run's goroutine when an attempt
	// starts (res is nil; the slot is held) and when it ended (res set; the
	// slot is released). It must be quick and safe for concurrent use.
	OnAttempt func(t *worker.Task, attempt int, res *worker.AttemptResult)
}

// withDefaults returns o with zero fields replaced by their defaults.
func (o Options) withDefaults() Options {
	if o.PoolSize == 0 {
		o.PoolSize = runtime.NumCPU()
	}
	if o.Timeout == 0 {
		o.Timeout = execDefaultTimeout
	}
	if o.MaxOutputBytes == 0 {
		o.MaxOutputBytes = execDefaultMaxOutputBytes
	}
	if o.MaxAttempts == 0 {
		o.MaxAttempts = execDefaultMaxAttempts
	}
	if o.StderrTail == 0 {
		o.StderrTail = execDefaultStderrTail
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// validate names the TOML key of the first bad field.
func (o Options) validate() error {
	switch {
	case o.BinaryPath == "":
		return fmt.Errorf("executor.binary_path: required")
	case o.PoolSize < 0:
		return fmt.Errorf("executor.pool_size: must not be negative (got %d)", o.PoolSize)
	case o.Timeout < 0:
		return fmt.Errorf("executor.timeout: must not be negative (got %s)", o.Timeout)
	case o.MaxOutputBytes < 0:
		return fmt.Errorf("executor.max_output_bytes: must not be negative (got %d)", o.MaxOutputBytes)
	case o.MaxAttempts < 0:
		return fmt.Errorf("handler.max_attempts: must not be negative (got %d)", o.MaxAttempts)
	case o.RetryBackoff < 0:
		return fmt.Errorf("handler.retry_backoff: must not be negative (got %s)", o.RetryBackoff)
	case o.StderrTail < 0:
		return fmt.Errorf("executor stderr tail: must not be negative (got %d)", o.StderrTail)
	}
	for k, v := range o.Env {
		if !execEnvOK(k, v) {
			return fmt.Errorf("executor.env: bad variable %q (empty name, or '=' or NUL in it)", k)
		}
	}
	return nil
}

// Pool runs tasks through executor processes, at most Size at once. It is
// the worker.TaskRunner of mode spawn; a persistent mode would be another
// worker.TaskRunner.
//
// Run is safe for concurrent use. Each attempt takes a slot; callers that
// find none wait in arrival order (a channel semaphore) until one frees up or
// their ctx ends. The slot is released while a retry backs off, so a task
// being retried never holds a process slot idle. Run has no ordering
// guarantee between tasks: callers that need per-key order must not start
// the next task of a key before the previous one returned.
type Pool struct {
	spawner *Spawner
	opts    Options
	slots   chan struct{}
	waiting atomic.Int64
}

var (
	_ worker.TaskRunner = (*Pool)(nil)
	_ worker.PoolStats  = (*Pool)(nil)
)

// NewPool validates opts and returns a pool. It starts nothing: processes
// are spawned by Run. A missing or unusable binary is not an error here (it
// may be installed later); each attempt then fails naming
// executor.binary_path.
func NewPool(opts Options) (*Pool, error) {
	s, err := NewSpawner(opts)
	if err != nil {
		return nil, err
	}
	return &Pool{spawner: s, opts: s.opts, slots: make(chan struct{}, s.opts.PoolSize)}, nil
}

// Size is the number of process slots (executor.pool_size).
func (p *Pool) Size() int { return cap(p.slots) }

// Busy is the number of slots in use now.
func (p *Pool) Busy() int { return len(p.slots) }

// Waiting is the number of attempts waiting for a free slot.
func (p *Pool) Waiting() int { return int(p.waiting.Load()) }

// Run runs t until an attempt is ok or MaxAttempts attempts were made; every
// non-ok attempt (failed, timeout, tempfail) is retried after a backoff.
// The result carries the last attempt's output, stderr, exit code,
// annotations and cache writes, the task labels merged with the last
// attempt's fd 3 labels (fd 3 wins), and the wall time of all attempts.
// A last attempt that asked to retry (exit 75) ends as failed. When ctx ends
// first the status is failed and Err wraps ctx.Err(), so callers can tell a
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
		if stopErr = p.acquire(ctx); stopErr != nil {
			break
		}
		if p.opts.OnAttempt != nil {
			p.opts.OnAttempt(t, attempt, nil)
		}
		a := p.spawner.Spawn(ctx, t)
		<-p.slots
		last, res.Attempts = &a, attempt
		if p.opts.OnAttempt != nil {
			p.opts.OnAttempt(t, attempt, last)
		}
		if a.Status == worker.StatusTempFail {
			tempfails++
		}
		if a.Status == worker.StatusOK || ctx.Err() != nil {
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
	case res.Status == worker.StatusTempFail:
		res.Status = worker.StatusFailed
		res.Err = fmt.Errorf("executor asked to retry (exit 75) %d times", tempfails)
	}
	return res
}

// acquire takes a slot, waiting in line when none is free.
func (p *Pool) acquire(ctx context.Context) error {
	select {
	case p.slots <- struct{}{}:
		return nil
	default:
	}
	p.waiting.Add(1)
	defer p.waiting.Add(-1)
	select {
	case p.slots <- struct{}{}:
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

// ConfigOptions maps the executor and handler keys of cfg onto Options.
// OnAttempt and Logger are left for the caller.
func ConfigOptions(cfg *config.Config) Options {
	e := cfg.Executor
	return Options{
		BinaryPath: e.BinaryPath, Args: e.Args, Env: e.Env, PoolSize: e.PoolSize, Timeout: e.Timeout.D(),
		MaxOutputBytes: e.MaxOutputBytes, MaxAttempts: cfg.Handler.MaxAttempts, RetryBackoff: cfg.Handler.RetryBackoff.D(),
	}
}
