// Package executor runs the external executor binary for each task: the
// Pool (pool.go) holds executor.pool_size seats, retries an attempt that
// failed, timed out or asked for a retry (exit 75) up to
// handler.max_attempts with handler.retry_backoff, and reports the busy,
// size and waiting figures the metrics and the runtime monitor read.
//
// Two modes, one per pool (executor.mode):
//
//   - spawn (spawn.go, protocol v1): one process per attempt; the message
//     on stdin, the result on stdout, diagnostics on stderr (last 8 KiB
//     kept), SVC_* environment variables, the optional fd 3 side channel
//     (fd3.go: annotations, labels, cache writes); the exit code is the
//     outcome; on timeout the whole process group is killed.
//   - persistent (persistent.go, seat.go, child.go, frame.go, protocol
//     v2): long-lived children, started by Pool.Start, that read request
//     frames and answer result frames; a child that dies, hangs or breaks
//     the protocol is killed and replaced, and the task is retried.
//
// An executor that cannot be started or get ready is unavailable, not the
// task's failure (health.go): no attempt is charged, the task waits
// (worker.WaitForExecutor) or ends with worker.ErrExecutorUnavailable, and
// the pool reports its health to watchers (readiness, the Kafka intake
// hold), the svc_executor_healthy gauge and the log.
//
// reap.go records every process the package starts; StartReaper
// (reap_linux.go, called by svc run) makes the worker the child subreaper
// of its executors and reaps their orphans, never a recorded process.
//
// guard.go starts the guard process that kills executor trees left behind
// by a SIGKILLed worker (the binary itself, `svc run` passes its path).
// docs/executor.md is the protocol an executor author reads.
package executor
