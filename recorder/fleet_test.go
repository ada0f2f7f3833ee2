package recorder

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"svc/worker/event"
)

// TestFleetSharedHistory runs two workers on one shared folder: each sees
// the other's sealed files, and a trace spans live, sealed and archived data.
func TestFleetSharedHistory(t *testing.T) {
	t.Parallel()
	clk := newClock()
	shared := t.TempDir()
	cfgA := baseConfig(t, t.TempDir(), shared, "w-a", clk)
	cfgA.ArchiveEnabled = true
	a := mustOpen(t, cfgA)
	b := mustOpen(t, baseConfig(t, t.TempDir(), shared, "w-b", clk))
	startRun(t, a)
	startRun(t, b)

	emit := func(r *Recorder, n int, phase string) {
		for i := range n {
			clk.tick()
			r.Event(event.Event{Type: event.TypeExecutorFinished, TaskID: "t1", Payload: json.RawMessage(`{"phase":"` + phase + `","i":` + itoa(i) + `}`)})
			r.Event(event.Event{Type: event.TypeTaskReceived, TaskID: "other"})
		}
		r.Task(event.TaskRow{TaskID: "t1", Source: "kafka", Status: "ok", Labels: map[string]string{"order": "o-1", "phase": phase}})
	}
	// Phase 1: both workers seal a file; each sees the other's.
	emit(a, 3, "a1")
	emit(b, 4, "b1")
	waitWritten(t, a, 6, 1)
	waitWritten(t, b, 8, 1)
	clk.add(time.Minute)
	seal(t, a)
	seal(t, b)
	for _, r := range []*Recorder{a, b} {
		dbs, _ := r.Databases(t.Context())
		var workers []string
		for _, d := range dbs {
			if d.Kind == "sealed" {
				workers = append(workers, d.Worker)
				if d.Cluster != "c1" || d.FromMs == 0 || d.ToMs < d.FromMs || d.SizeBytes == 0 {
					t.Errorf("%s: Databases() sealed entry %+v incomplete", r.cfg.Worker, d)
				}
				if _, err := r.ResolveDownload(d.Path); err != nil {
					t.Errorf("%s: ResolveDownload(%s) = %v", r.cfg.Worker, d.Path, err)
				}
			}
			if d.Kind == "live" && (d.Path != "live/"+r.cfg.Worker || d.Worker != r.cfg.Worker) {
				t.Errorf("%s: live entry %+v", r.cfg.Worker, d)
			}
		}
		if strings.Join(workers, ",") != "w-b,w-a" && strings.Join(workers, ",") != "w-a,w-b" {
			t.Errorf("%s: sealed files of workers %v, want w-a and w-b", r.cfg.Worker, workers)
		}
	}

	// Phase 2: both sealed files age past ArchiveAfter and are folded.
	clk.add(2 * time.Hour)
	if err := a.archivePass(t.Context()); err != nil {
		t.Fatalf("archivePass() error = %v", err)
	}
	if k := kinds(t, b); k["sealed"] != 0 || k["archive"] != 1 {
		t.Fatalf("after archiving, b sees %v, want one archive and no sealed file", k)
	}
	if _, err := os.Stat(filepath.Join(shared, "history", "c1", ".archive.lock")); !os.IsNotExist(err) {
		t.Errorf("archive lock left behind: %v", err)
	}

	// Phase 3: b seals a new file, a keeps a live one.
	emit(b, 2, "b2")
	emit(a, 1, "a3")
	waitWritten(t, b, 12, 2)
	waitWritten(t, a, 8, 2)
	seal(t, b)
	checkTrace := func(r *Recorder, want map[string]int) {
		t.Helper()
		evs, err := r.Trace(t.Context(), "t1")
		if err != nil {
			t.Fatalf("Trace() error = %v", err)
		}
		got := map[string]int{}
		for i, e := range evs {
			var p struct{ Phase string }
			json.Unmarshal(e.Payload, &p)
			got[p.Phase]++
			if e.TaskID != "t1" || (i > 0 && e.TSms < evs[i-1].TSms) {
				t.Errorf("Trace()[%d] = %+v out of order or wrong task", i, e)
			}
		}
		for phase, n := range want {
			if got[phase] != n {
				t.Errorf("%s: Trace(t1) has %d events of %s, want %d (all: %v)", r.cfg.Worker, got[phase], phase, n, got)
			}
		}
		rows, err := r.TraceByLabel(t.Context(), "order", "o-1", 100)
		if err != nil || len(rows) < 3 {
			t.Errorf("%s: TraceByLabel(order=o-1) = %d rows, %v; want >= 3", r.cfg.Worker, len(rows), err)
		}
	}
	all := map[string]int{"a1": 3, "b1": 4, "b2": 2, "a3": 1}
	checkTrace(a, all) // live a3, sealed b2, archive a1+b1

	// Phase 4: b2 is folded into the existing archive (decompress, add,
	// recompress); nothing is lost or doubled.
	clk.add(2 * time.Hour)
	if err := a.archivePass(t.Context()); err != nil {
		t.Fatalf("second archivePass() error = %v", err)
	}
	if k := kinds(t, a); k["sealed"] != 0 || k["archive"] != 1 {
		t.Fatalf("after second pass a sees %v, want one archive", k)
	}
	checkTrace(a, all)
	checkTrace(b, map[string]int{"a1": 3, "b1": 4, "b2": 2, "a3": 0}) // a3 is in a's live file only
}

// TestArchiveLock covers the lease: a valid lock blocks, a stale one is
// taken over, and release removes only our own lock.
func TestArchiveLock(t *testing.T) {
	clk := newClock()
	shared := t.TempDir()
	a := mustOpen(t, baseConfig(t, "", shared, "w-a", clk))
	b := mustOpen(t, baseConfig(t, "", shared, "w-b", clk))
	la, err := a.acquireArchiveLock()
	if err != nil || la == nil {
		t.Fatalf("a.acquireArchiveLock() = %v, %v; want the lock", la, err)
	}
	if lb, err := b.acquireArchiveLock(); lb != nil || err != nil {
		t.Fatalf("b.acquireArchiveLock() = %v, %v while a holds it; want nil, nil", lb, err)
	}
	clk.add(archiveLease + time.Second)
	lb, err := b.acquireArchiveLock()
	if err != nil || lb == nil {
		t.Fatalf("b.acquireArchiveLock() after lease = %v, %v; want takeover", lb, err)
	}
	if la.refresh() {
		t.Errorf("a.refresh() = true after takeover, want false")
	}
	la.release() // must not remove b's lock
	if !lb.held() {
		t.Errorf("b lost its lock when a released")
	}
	lb.release()
	if _, err := os.Stat(filepath.Join(shared, "history", "c1", lockName)); !os.IsNotExist(err) {
		t.Errorf("lock file remains after release: %v", err)
	}
	leftovers, _ := filepath.Glob(filepath.Join(shared, "history", "c1", ".archive.lock.*"))
	if len(leftovers) != 0 {
		t.Errorf("takeover left %v", leftovers)
	}
}

// TestMergedRetention: merge results older than the retention are removed
// by an archive pass, never when archiving is off.
func TestMergedRetention(t *testing.T) {
	clk := newClock()
	shared := t.TempDir()
	cfg := baseConfig(t, "", shared, "w", clk)
	cfg.ArchiveEnabled = true
	r := mustOpen(t, cfg)
	merged := filepath.Join(shared, "merged")
	os.MkdirAll(merged, 0o700)
	old := filepath.Join(merged, "merged-"+itoa(int(clk.now().Add(-8*24*time.Hour).UnixMilli()))+"-ab.db")
	fresh := filepath.Join(merged, "merged-"+itoa(int(clk.nowMs()))+"-cd.db")
	for _, p := range []string{old, fresh, old + ".meta.json"} {
		os.WriteFile(p, []byte("x"), 0o600)
	}
	if err := r.archivePass(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(old); !os.IsNotExist(err) {
		t.Errorf("old merge result still present")
	}
	if _, err := os.Stat(old + ".meta.json"); !os.IsNotExist(err) {
		t.Errorf("old merge meta still present")
	}
	mustStat(t, fresh)
}

func itoa(i int) string {
	b, _ := json.Marshal(i)
	return string(b)
}

// TestRunLoops drives sealing, archiving and the watchdog with Run's own
// tickers (tiny intervals, real clock).
func TestRunLoops(t *testing.T) {
	t.Parallel()
	dir, shared := t.TempDir(), t.TempDir()
	r := mustOpen(t, Config{Dir: dir, SharedDir: shared, Worker: "w", Cluster: "c1", Logger: testLogger(t),
		SealInterval: 30 * time.Millisecond, WatchdogInterval: 10 * time.Millisecond,
		ArchiveEnabled: true, ArchiveAfter: time.Millisecond, ArchiveWindow: 10 * time.Millisecond})
	stop := startRun(t, r)
	watchdog := filepath.Join(dir, "w.watchdog")
	waitFile(t, watchdog)
	first, _ := os.ReadFile(watchdog)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for r.Stats().ArchivedFiles < 2 {
			r.Event(event.Event{Type: event.TypeTaskReceived, TaskID: "t"})
			time.Sleep(time.Millisecond)
		}
	}()
	// Readers race the seals and archive passes.
	readers := make(chan error, 1)
	go func() {
		for {
			select {
			case <-done:
				readers <- nil
				return
			default:
			}
			_, err1 := r.Events(t.Context(), EventQuery{Limit: 50})
			_, err2 := r.Trace(t.Context(), "t")
			_, err3 := r.Databases(t.Context())
			err4 := r.SnapshotLive(t.Context(), io.Discard)
			if err := errors.Join(err1, err2, err3, err4); err != nil {
				readers <- err
				return
			}
		}
	}()
	waitStats(t, r, "two files sealed and archived by the loops", func(s Stats) bool { return s.ArchivedFiles >= 2 })
	<-done
	if err := <-readers; err != nil {
		t.Errorf("concurrent reader error = %v", err)
	}
	if now, _ := os.ReadFile(watchdog); len(first) == 0 || string(now) == string(first) {
		t.Errorf("watchdog not rewritten: %q then %q", first, now)
	}
	if err := stop(); err != nil {
		t.Fatalf("Run() = %v", err)
	}
	evs, err := r.Trace(t.Context(), "t")
	if err != nil || uint64(len(evs)) != r.Stats().EventsWritten {
		t.Errorf("Trace(t) = %d events, %v; want all %d written", len(evs), err, r.Stats().EventsWritten)
	}
	if s := r.Stats(); s.SealErrors != 0 || s.ArchiveErrors != 0 || s.WriteErrors != 0 {
		t.Errorf("Stats() = %+v, want no errors", s)
	}
}
