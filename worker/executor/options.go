package executor

import (
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"svc/worker"
	"svc/worker/config"
)

// Executor modes (executor.mode).
const (
	ModeSpawn      = "spawn"
	ModePersistent = "persistent"
)

// Executor defaults for zero Options fields.
const (
	defaultTimeout        = 30 * time.Second
	defaultMaxOutputBytes = 8 << 20
	defaultMaxAttempts    = 3
	defaultStderrTail     = 8 << 10
	defaultReadyTimeout   = 10 * time.Second
	defaultStopGrace      = 2 * time.Second
	// maxRetryBackoff caps the exponential backoff between attempts
	// (unless RetryBackoff itself is larger).
	maxRetryBackoff = 10 * time.Second
)

// Options configures the executor pool. Zero values take the defaults
// noted per field; negative values are rejected by NewPool.
type Options struct {
	// Mode is ModeSpawn (one process per attempt, the default when empty)
	// or ModePersistent (PoolSize long-lived processes, protocol v2).
	Mode           string
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

	// MaxTasksPerChild recycles a persistent child after that many tasks
	// (executor.max_tasks_per_child; 0: never).
	MaxTasksPerChild int
	// ReadyTimeout bounds a persistent child's start-up until its ready
	// frame (executor.ready_timeout; 0: 10s).
	ReadyTimeout time.Duration
	// StopGrace is how long a persistent child has to exit after EOF on
	// stdin before SIGTERM, and after SIGTERM before SIGKILL (0: 2s).
	StopGrace time.Duration
	// Registerer takes the persistent pool's metrics; nil registers none.
	Registerer prometheus.Registerer
	// GuardBinary, when set, is a binary that runs RunGuard when started
	// with GuardArg (the worker's own: svc does). It is started once and
	// kills every executor process group left when the worker dies, so that
	// grandchildren die too; "" relies on the parent-death signal alone.
	GuardBinary string
}

// withDefaults returns o with zero fields replaced by their defaults.
func (o Options) withDefaults() Options {
	if o.Mode == "" {
		o.Mode = ModeSpawn
	}
	if o.PoolSize == 0 {
		o.PoolSize = runtime.NumCPU()
	}
	if o.Timeout == 0 {
		o.Timeout = defaultTimeout
	}
	if o.MaxOutputBytes == 0 {
		o.MaxOutputBytes = defaultMaxOutputBytes
	}
	if o.MaxAttempts == 0 {
		o.MaxAttempts = defaultMaxAttempts
	}
	if o.StderrTail == 0 {
		o.StderrTail = defaultStderrTail
	}
	if o.ReadyTimeout == 0 {
		o.ReadyTimeout = defaultReadyTimeout
	}
	if o.StopGrace == 0 {
		o.StopGrace = defaultStopGrace
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// maxFrameInput bounds a task frame's payload: the length prefix is 32
// bits and the header needs room.
const maxFrameInput = 1<<32 - 1 - maxHeaderBytes - 1

// validate names the TOML key of the first bad field.
func (o Options) validate() error {
	switch {
	case o.Mode != "" && o.Mode != ModeSpawn && o.Mode != ModePersistent:
		return fmt.Errorf("executor.mode: %q is not one of spawn, persistent", o.Mode)
	case o.BinaryPath == "":
		return fmt.Errorf("executor.binary_path: required")
	case o.PoolSize < 0:
		return fmt.Errorf("executor.pool_size: must not be negative (got %d)", o.PoolSize)
	case o.Timeout < 0:
		return fmt.Errorf("executor.timeout: must not be negative (got %s)", o.Timeout)
	case o.MaxOutputBytes < 0:
		return fmt.Errorf("executor.max_output_bytes: must not be negative (got %d)", o.MaxOutputBytes)
	case o.MaxOutputBytes > maxFrameInput:
		return fmt.Errorf("executor.max_output_bytes: %d is over the limit of %d", o.MaxOutputBytes, int64(maxFrameInput))
	case o.MaxAttempts < 0:
		return fmt.Errorf("handler.max_attempts: must not be negative (got %d)", o.MaxAttempts)
	case o.RetryBackoff < 0:
		return fmt.Errorf("handler.retry_backoff: must not be negative (got %s)", o.RetryBackoff)
	case o.StderrTail < 0:
		return fmt.Errorf("executor stderr tail: must not be negative (got %d)", o.StderrTail)
	case o.MaxTasksPerChild < 0:
		return fmt.Errorf("executor.max_tasks_per_child: must not be negative (got %d)", o.MaxTasksPerChild)
	case o.ReadyTimeout < 0:
		return fmt.Errorf("executor.ready_timeout: must not be negative (got %s)", o.ReadyTimeout)
	case o.StopGrace < 0:
		return fmt.Errorf("executor stop grace: must not be negative (got %s)", o.StopGrace)
	}
	for k, v := range o.Env {
		if !envOK(k, v) {
			return fmt.Errorf("executor.env: bad variable %q (empty name, or '=' or NUL in it)", k)
		}
	}
	return nil
}

// ConfigOptions maps the executor and handler keys of cfg onto Options.
// OnAttempt, Logger and Registerer are left for the caller.
func ConfigOptions(cfg *config.Config) Options {
	e := cfg.Executor
	return Options{
		Mode: e.Mode, BinaryPath: e.BinaryPath, Args: e.Args, Env: e.Env, PoolSize: e.PoolSize, Timeout: e.Timeout.D(),
		MaxOutputBytes: e.MaxOutputBytes, MaxAttempts: cfg.Handler.MaxAttempts, RetryBackoff: cfg.Handler.RetryBackoff.D(),
		MaxTasksPerChild: e.MaxTasksPerChild, ReadyTimeout: e.ReadyTimeout.D(),
	}
}

// ErrStart is wrapped by the error of an executor start that failed
// (missing binary, not executable, not a program, or, in mode persistent,
// no child reached readiness). The message is not at fault: the executor
// is unavailable (worker.ErrExecutorUnavailable) and no attempt is
// charged; the only exception, an environment too large to exec (E2BIG),
// fails its attempt unretried.
var ErrStart = errors.New("start executor")
