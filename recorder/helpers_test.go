package recorder

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"svc/worker/config"
	"svc/worker/workertest/wait"

	"zombiezen.com/go/sqlite"
)

// t0 is an hour boundary plus one second, so early files share a window.
const t0 = 472222*3600*1000 + 1000

// clock is an injectable Config.Now.
type clock struct{ ms atomic.Int64 }

func newClock() *clock {
	c := &clock{}
	c.ms.Store(t0)
	return c
}

func (c *clock) now() time.Time      { return time.UnixMilli(c.ms.Load()) }
func (c *clock) add(d time.Duration) { c.ms.Add(d.Milliseconds()) }
func (c *clock) tick() time.Time     { c.ms.Add(1); return c.now() }
func (c *clock) nowMs() int64        { return c.ms.Load() }

// testLogger logs to the test output at debug level when -v is set.
func testLogger(t testing.TB) *slog.Logger {
	if !testing.Verbose() {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

// baseConfig is a disk-mode config with long intervals (tests seal and
// archive explicitly).
func baseConfig(t testing.TB, dir, shared, worker string, clk *clock) Config {
	return Config{
		Dir: dir, SharedDir: shared, Worker: worker, Cluster: "c1",
		StartedAt: clk.now(), SealInterval: time.Hour, WatchdogInterval: time.Hour,
		ArchiveAfter: time.Hour, ArchiveWindow: time.Hour,
		Logger: testLogger(t), Now: clk.now, MaskEnv: config.MaskEnv,
	}
}

// mustOpen opens a recorder and closes it at the end of the test.
func mustOpen(t testing.TB, cfg Config) *Recorder {
	t.Helper()
	r, err := Open(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Open() error = %v", err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// startRun runs r until the returned stop is called (or the test ends);
// stop returns Run's error.
func startRun(t testing.TB, r *Recorder) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	var stopped atomic.Bool
	var result error
	stop = func() error {
		if stopped.CompareAndSwap(false, true) {
			cancel()
			result = <-done
		}
		return result
	}
	t.Cleanup(func() { stop() })
	return stop
}

// waitStats waits until r's counters satisfy cond; a failure shows the
// last ones.
func waitStats(t testing.TB, r *Recorder, what string, cond func(Stats) bool) {
	t.Helper()
	wait.For(t, wait.Long, what, func() (bool, string) {
		s := r.Stats()
		return cond(s), fmt.Sprintf("stats %+v", s)
	})
}

// waitWritten waits until the writer stored n events in total.
func waitWritten(t testing.TB, r *Recorder, events, tasks uint64) {
	t.Helper()
	waitStats(t, r, fmt.Sprintf("%d events and %d tasks written", events, tasks), func(s Stats) bool {
		return s.EventsWritten >= events && s.TasksWritten >= tasks
	})
}

// waitFile waits until path exists.
func waitFile(t testing.TB, path string) {
	t.Helper()
	wait.For(t, wait.Long, path, func() (bool, string) {
		_, err := os.Stat(path)
		return err == nil, fmt.Sprint(err)
	})
}

// seal asks a running recorder to seal now.
func seal(t testing.TB, r *Recorder) {
	t.Helper()
	if err := r.sealNow(context.Background()); err != nil {
		t.Fatalf("sealNow() error = %v", err)
	}
}

// kinds counts Databases entries by kind.
func kinds(t testing.TB, r *Recorder) map[string]int {
	t.Helper()
	dbs, err := r.Databases(context.Background())
	if err != nil {
		t.Fatalf("Databases() error = %v", err)
	}
	m := map[string]int{}
	for _, d := range dbs {
		m[d.Kind]++
	}
	return m
}

func mustStat(t testing.TB, path string) os.FileInfo {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatalf("Stat(%s) error = %v", path, err)
	}
	return fi
}

func fileExists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// scan reads the first row of query q (with args) into dest: *int,
// *int64 or *string each; no row is an error.
func scan(c *sqlite.Conn, q string, dest []any, args ...any) error {
	found := false
	err := query(c, q, func(st *sqlite.Stmt) error {
		if found {
			return nil
		}
		found = true
		for i, d := range dest {
			switch d := d.(type) {
			case *int:
				*d = st.ColumnInt(i)
			case *int32:
				*d = st.ColumnInt32(i)
			case *int64:
				*d = st.ColumnInt64(i)
			case *string:
				*d = st.ColumnText(i)
			default:
				return fmt.Errorf("scan: %T", d)
			}
		}
		return nil
	}, args...)
	if err == nil && !found {
		err = fmt.Errorf("%s: no row", q)
	}
	return err
}

// openTestConn opens path read-write (creating it) on its own connection.
func openTestConn(t testing.TB, path string) *sqlite.Conn {
	t.Helper()
	c, err := sqlite.OpenConn(sqliteURI(path, ""), sqlite.OpenReadWrite|sqlite.OpenCreate|sqlite.OpenURI)
	if err != nil {
		t.Fatal(err)
	}
	c.SetBusyTimeout(5 * time.Second)
	return c
}

// openReadOnly opens a finished (sealed, archived, merged) file. immutable=1
// skips locking and never creates -wal or -shm files beside it, which keeps
// the shared folder clean and works on read-only mounts.
func openReadOnly(ctx context.Context, path string) (*sqlite.Conn, error) {
	c, err := openConn(ctx, sqliteURI(path, "mode=ro&immutable=1"), sqlite.OpenReadOnly)
	if err != nil {
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	return c, nil
}
