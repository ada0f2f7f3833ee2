// Package executor runs the external executor binary for each task. The
// Pool (pool.go) bounds concurrency to executor.pool_size and retries
// failed, timed-out or tempfail attempts up to handler.max_attempts.
// Mode spawn (spawn.go) starts one process per attempt (protocol v1);
// mode persistent (persistent.go, seat.go, child.go, frame.go) keeps
// long-lived children fed with frames (protocol v2). docs/executor.md is
// the protocol an executor author reads; health.go says when the executor
// is unavailable, reap.go and guard.go keep executor trees from outliving
// their attempt or the worker.
package executor
