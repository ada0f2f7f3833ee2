package executor

import (
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"svc/worker/config"
	"svc/worker/model"
)

// Executor modes (executor.mode).
const (
	ModeSpawn      = "spawn"
	ModePersistent = "persistent"
)

// maxRetryBackoff caps the backoff between attempts (unless RetryBackoff
// itself is larger).
const maxRetryBackoff = 10 * time.Second

// Options configures the executor pool. Zero values take the defaults
// noted per field; negative values are rejected by NewPool.
type Options struct {
	Mode           string            // executor.mode: ModeSpawn (when empty) or ModePersistent
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
	// starts (res nil) and when it ended (res set). It must be quick and
	// safe for concurrent use.
	OnAttempt func(t *model.Task, attempt int, res *model.AttemptResult)

	MaxTasksPerChild int           // executor.max_tasks_per_child: recycle a persistent child after that many (0: never)
	ReadyTimeout     time.Duration // executor.ready_timeout: a persistent child's start-up (0: 10s)
	// StopGrace is how long a persistent child has to exit after EOF on
	// stdin before SIGTERM, and after SIGTERM before SIGKILL (0: 2s).
	StopGrace  time.Duration
	Registerer prometheus.Registerer // takes the pool's metrics; nil registers none
	// GuardBinary, when set, is started once with GuardArg and must run
	// RunGuard (svc's own binary does); "" relies on the parent-death
	// signal alone.
	GuardBinary string
}

// withDefaults returns o with zero fields replaced by their defaults.
func (o Options) withDefaults() Options {
	orDefault(&o.Mode, ModeSpawn)
	orDefault(&o.PoolSize, runtime.NumCPU())
	orDefault(&o.Timeout, 30*time.Second)
	orDefault(&o.MaxOutputBytes, 8<<20)
	orDefault(&o.MaxAttempts, 3)
	orDefault(&o.StderrTail, 8<<10)
	orDefault(&o.ReadyTimeout, 10*time.Second)
	orDefault(&o.StopGrace, 2*time.Second)
	orDefault(&o.Logger, slog.New(slog.DiscardHandler))
	if o.OnAttempt == nil {
		o.OnAttempt = func(*model.Task, int, *model.AttemptResult) {}
	}
	return o
}

func orDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
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
	case o.MaxOutputBytes > maxFrameInput:
		return fmt.Errorf("executor.max_output_bytes: %d is over the limit of %d", o.MaxOutputBytes, int64(maxFrameInput))
	}
	for _, f := range []struct {
		key string
		bad bool
		got any
	}{
		{"executor.pool_size", o.PoolSize < 0, o.PoolSize},
		{"executor.timeout", o.Timeout < 0, o.Timeout},
		{"executor.max_output_bytes", o.MaxOutputBytes < 0, o.MaxOutputBytes},
		{"handler.max_attempts", o.MaxAttempts < 0, o.MaxAttempts},
		{"handler.retry_backoff", o.RetryBackoff < 0, o.RetryBackoff},
		{"executor stderr tail", o.StderrTail < 0, o.StderrTail},
		{"executor.max_tasks_per_child", o.MaxTasksPerChild < 0, o.MaxTasksPerChild},
		{"executor.ready_timeout", o.ReadyTimeout < 0, o.ReadyTimeout},
		{"executor stop grace", o.StopGrace < 0, o.StopGrace},
	} {
		if f.bad {
			return fmt.Errorf("%s: must not be negative (got %v)", f.key, f.got)
		}
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
// (missing binary, not executable, or no persistent child got ready): the
// executor is unavailable and no attempt is charged, except for an
// environment too large to exec (E2BIG), which fails its attempt.
var ErrStart = errors.New("start executor")
