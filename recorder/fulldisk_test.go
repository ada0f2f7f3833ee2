package recorder

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"svc/worker/event"
)

// mountTmpfs mounts a small tmpfs (opts such as "size=2m" or "ro") on a new
// folder and unmounts it when the test ends. It skips the test, saying why,
// where mounting is impossible (not root, no CAP_SYS_ADMIN).
func mountTmpfs(t *testing.T, flags uintptr, opts string) string {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", flags, opts); err != nil {
		t.Skipf("SKIP: cannot mount a tmpfs here (needs root or CAP_SYS_ADMIN): %v; this case runs only where mounting is possible", err)
	}
	t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
	return dir
}

// fillDisk writes a file in dir until the file system is full and returns
// a function that frees the space again.
func fillDisk(t *testing.T, dir string) (free func()) {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 64<<10)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("fill %s: %v", dir, err)
			}
			break
		}
	}
	// Small writes may still fit in the last partial page: fill that too.
	for {
		if _, err := f.Write(chunk[:512]); err != nil {
			break
		}
	}
	f.Close()
	return func() { os.Remove(path) }
}

// logRecords keeps every record logged through it, for assertions on log
// volume and content.
type logRecords struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (l *logRecords) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecords) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logRecords) WithGroup(string) slog.Handler            { return l }
func (l *logRecords) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recs = append(l.recs, r.Clone())
	return nil
}

// named returns the records with message msg, each as its attributes.
func (l *logRecords) named(msg string) []map[string]slog.Value {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]slog.Value
	for _, r := range l.recs {
		if r.Message != msg {
			continue
		}
		m := map[string]slog.Value{"level": slog.StringValue(r.Level.String())}
		r.Attrs(func(a slog.Attr) bool { m[a.Key] = a.Value; return true })
		out = append(out, m)
	}
	return out
}

// TestFullDiskAtRuntime fills storage.dir (a real tmpfs) under a running
// recorder: every lost row is counted (not batches), the error log stays at
// one line per episode and interval, the dashboard counts say they are
// incomplete, and recording resumes once space is back.
func TestFullDiskAtRuntime(t *testing.T) {
	t.Parallel()
	mnt := mountTmpfs(t, 0, "size=4m")
	clk := newClock()
	logs := &logRecords{}
	cfg := baseConfig(t, filepath.Join(mnt, "storage"), t.TempDir(), "w", clk)
	cfg.Logger = slog.New(logs)
	r := mustOpen(t, cfg)
	startRun(t, r)

	sent := 0
	// wave sends n task rows and waits until the writer has dealt with them.
	wave := func(n int) {
		t.Helper()
		for range n {
			r.Task(event.TaskRow{TaskID: "t", Source: "http", Status: "ok", Labels: map[string]string{"k": strings.Repeat("v", 200)}})
			sent++
		}
		waitStats(t, r, "the writer to store or lose every row", func(s Stats) bool {
			return s.Queued == 0 && int(s.TasksWritten+s.TasksDropped) == sent
		})
	}
	wave(5)
	free := fillDisk(t, mnt)
	const waves, perWave = 20, 25
	for range waves {
		wave(perWave)
	}
	s := r.Stats()
	if s.WriteErrors < 2 || s.RowsLost != s.TasksDropped || int(s.TasksWritten+s.RowsLost) != sent {
		t.Fatalf("Stats() = %+v after filling the disk; want several failed batches and every lost row counted", s)
	}
	if s.RowsLost <= uint64(s.WriteErrors) {
		t.Errorf("RowsLost = %d for %d failed batches: rows, not batches, must be counted", s.RowsLost, s.WriteErrors)
	}
	failed := logs.named("recorder_write_failed")
	if len(failed) != 1 {
		t.Fatalf("%d recorder_write_failed lines for %d failed batches within one interval, want 1", len(failed), s.WriteErrors)
	}
	c, _ := r.Counts(t.Context())
	if !c.Incomplete || c.LostRows != int64(s.RowsLost) || c.Total != int64(sent) {
		t.Errorf("Counts() = %+v, want incomplete with %d lost rows and every one of the %d tasks counted", c, s.RowsLost, sent)
	}

	// After the interval, one summary line carries the rows lost since.
	lostBefore := s.RowsLost
	clk.add(writeLossInterval)
	wave(perWave)
	wave(perWave)
	failed = logs.named("recorder_write_failed")
	if len(failed) != 2 {
		t.Fatalf("%d recorder_write_failed lines after the interval, want 2", len(failed))
	}
	// The two lines together account for every row lost up to the second
	// one: at least all rows lost before the interval ended, at most all.
	s = r.Stats()
	first, second := failed[0]["lost_rows"].Int64(), failed[1]["lost_rows"].Int64()
	if reported := uint64(first + second); reported <= lostBefore || reported > s.RowsLost {
		t.Errorf("lines report %d + %d lost rows; want more than the %d lost before the interval, at most %d",
			first, second, lostBefore, s.RowsLost)
	}

	free()
	before := r.Stats().TasksWritten
	wave(3)
	waitStats(t, r, "writes to resume once space is back", func(s Stats) bool { return s.TasksWritten > before })
	rec := logs.named("recorder_write_recovered")
	if len(rec) != 1 || uint64(rec[0]["lost_rows"].Int64()) != r.Stats().RowsLost {
		t.Errorf("recorder_write_recovered lines = %v, want one with lost_rows %d", rec, r.Stats().RowsLost)
	}
}

// TestMemoryOnlyFallback: a storage.dir that cannot hold the live file
// (full, read-only, a file in its place) makes Open start memory-only with
// a loud warning instead of failing; the recorder still records.
func TestMemoryOnlyFallback(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		dir  func(t *testing.T) string
	}{
		{"file where the folder should be", func(t *testing.T) string {
			p := filepath.Join(t.TempDir(), "storage")
			os.WriteFile(p, []byte("not a folder"), 0o600)
			return p
		}},
		{"read-only folder", func(t *testing.T) string {
			if os.Geteuid() != 0 {
				dir := t.TempDir()
				os.Chmod(dir, 0o500)
				t.Cleanup(func() { os.Chmod(dir, 0o700) })
				return dir
			}
			// Root ignores folder modes; a read-only mount binds it too.
			return mountTmpfs(t, syscall.MS_RDONLY, "size=1m")
		}},
		{"full file system", func(t *testing.T) string {
			mnt := mountTmpfs(t, 0, "size=256k")
			fillDisk(t, mnt)
			return mnt
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := tc.dir(t)
			logs := &logRecords{}
			cfg := baseConfig(t, dir, t.TempDir(), "w", newClock())
			cfg.Logger = slog.New(logs)
			r, err := Open(t.Context(), cfg)
			if err != nil {
				t.Fatalf("Open(%s) error = %v, want a memory-only fallback", dir, err)
			}
			defer r.Close()
			warn := logs.named("recorder_memory_only_fallback")
			if len(warn) != 1 || warn[0]["level"].String() != "WARN" || warn[0]["dir"].String() != dir || warn[0]["error"].String() == "" {
				t.Errorf("fallback log = %v, want one WARN naming dir %s and the error", warn, dir)
			}
			if !r.MemoryOnly() || !r.Stats().MemoryOnly {
				t.Errorf("MemoryOnly() = false after the fallback")
			}
			stop := startRun(t, r)
			r.Event(event.Event{Type: event.TypeTaskReceived, TaskID: "t"})
			r.Task(event.TaskRow{TaskID: "t", Source: "http", Status: "ok"})
			if evs, _ := r.Events(t.Context(), EventQuery{}); len(evs) != 1 {
				t.Errorf("Events() = %v, want the event kept in memory", evs)
			}
			if err := r.SnapshotLive(t.Context(), io.Discard); !errors.Is(err, ErrNoLiveFile) {
				t.Errorf("SnapshotLive() error = %v, want ErrNoLiveFile", err)
			}
			if err := stop(); err != nil {
				t.Errorf("Run() = %v", err)
			}
		})
	}
}

// TestFallbackKeepsCrash: a crash found before storage.dir turned out
// unusable is still reported.
func TestFallbackKeepsCrash(t *testing.T) {
	t.Parallel()
	mnt := mountTmpfs(t, 0, "size=256k")
	os.WriteFile(filepath.Join(mnt, "w.watchdog"), []byte(`{"pid":4242,"rss_bytes":1,"ts_ms":1}`), 0o600)
	fillDisk(t, mnt)
	r := mustOpen(t, baseConfig(t, mnt, t.TempDir(), "w", newClock()))
	evs, _ := r.Events(t.Context(), EventQuery{Types: []string{event.TypeCrashDetected}})
	if !r.MemoryOnly() || len(evs) != 1 || !strings.Contains(string(evs[0].Payload), "4242") {
		t.Errorf("memory-only %v, crash events %v; want the crash kept in memory", r.MemoryOnly(), evs)
	}
}
