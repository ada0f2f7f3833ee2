package recorder

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"svc/worker/event"
	"svc/worker/workertest/wait"
)

// TestLiveFileSealedAtItsSize: a busy worker's live file is sealed as soon
// as it outgrows LiveMaxBytes, long before the seal interval, so it stays
// bounded; every event stays traceable in the sealed files.
func TestLiveFileSealedAtItsSize(t *testing.T) {
	t.Parallel()
	clk := newClock()
	dir, shared := t.TempDir(), t.TempDir()
	cfg := baseConfig(t, dir, shared, "w", clk) // seal interval: an hour
	cfg.LiveMaxBytes = 256 << 10
	cfg.FullDetail = true // events written at once, not after the summary hold
	r := mustOpen(t, cfg)
	startRun(t, r)
	payload := json.RawMessage(`{"stdout_tail":"` + strings.Repeat("x", 1000) + `"}`)
	var written uint64
	for burst := range 2 {
		for range 600 { // about 700 KiB with the indexes
			clk.tick()
			r.Event(event.Event{Type: event.TypeExecutorFinished, TaskID: "t" + itoa(burst), Payload: payload})
			written++
		}
		waitWritten(t, r, written, 0)
		waitStats(t, r, "seals of the oversized live file", func(s Stats) bool { return s.Seals >= uint64(2*burst+1) })
		// The burst's last write transaction may have taken the new live
		// file past the bound just now: its seal follows that write.
		wait.For(t, wait.Long, fmt.Sprintf("after burst %d, a live file below %d bytes", burst, cfg.LiveMaxBytes), func() (bool, string) {
			dbs, err := r.Databases(t.Context())
			if err != nil || len(dbs) == 0 {
				return false, fmt.Sprint(dbs, err)
			}
			return dbs[0].Kind == "live" && dbs[0].SizeBytes <= cfg.LiveMaxBytes, fmt.Sprintf("Databases()[0] = %+v", dbs[0])
		})
	}
	sealed, _ := filepath.Glob(filepath.Join(shared, "history", "c1", "w-*.db"))
	if len(sealed) < 2 {
		t.Errorf("sealed files = %v, want at least one per burst", sealed)
	}
	for _, p := range sealed {
		if fi := mustStat(t, p); fi.Size() > 2*cfg.LiveMaxBytes {
			t.Errorf("sealed file %s holds %d bytes, over twice live_max_bytes", filepath.Base(p), fi.Size())
		}
	}
	for burst := range 2 {
		if evs, err := r.Trace(t.Context(), "t"+itoa(burst)); err != nil || len(evs) != 600 {
			t.Errorf("Trace(t%d) = %d events, %v; want all 600", burst, len(evs), err)
		}
	}
}

// writeHist writes a history file of cluster c1 into shared with its
// .meta.json: a sealed file of worker w (kind "sealed") or the archive of
// the window starting at ws (kind "archive"), holding one event of task
// "t<from>" at from and pad bytes of random data, which no compression
// shrinks. It returns the file's size with its meta.
func writeHist(t testing.TB, shared, kind string, ws, from, to int64, pad int) int64 {
	t.Helper()
	c1 := filepath.Join(shared, "history", "c1")
	tmp := filepath.Join(t.TempDir(), "h.db")
	db, err := openBuildDB(t.Context(), tmp)
	if err != nil {
		t.Fatal(err)
	}
	err = execSQL(db, `INSERT INTO events(ts_ms, type, task_id, worker) VALUES(?, 'task_received', ?, 'w')`, from, "t"+strconv.FormatInt(from, 10))
	if err == nil {
		err = execSQL(db, `CREATE TABLE pad(b BLOB)`)
	}
	if err == nil {
		err = execSQL(db, `INSERT INTO pad VALUES(randomblob(?))`, pad)
	}
	if err == nil {
		err = setMeta(db, "format", "1", "kind", kind, "cluster", "c1",
			"from_ms", strconv.FormatInt(from, 10), "to_ms", strconv.FormatInt(to, 10))
	}
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(tmp)
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("w-%d-%d.db", from, to)
	if kind == "archive" {
		name = fmt.Sprintf("c1-%d.db.gz", ws)
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		zw.Write(data)
		zw.Close()
		data = buf.Bytes()
	}
	meta, _ := json.Marshal(fileMeta{Kind: kind, Worker: "w", Cluster: "c1", FromMs: from, ToMs: to, Events: 1, Format: 1})
	os.MkdirAll(c1, 0o700)
	if err := os.WriteFile(filepath.Join(c1, name), data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(c1, name+".meta.json"), meta, 0o600); err != nil {
		t.Fatal(err)
	}
	return int64(len(data) + len(meta))
}

// traced reports whether a trace finds task t<from>.
func traced(t testing.TB, r *Recorder, from int64) bool {
	t.Helper()
	evs, err := r.Trace(t.Context(), "t"+strconv.FormatInt(from, 10))
	if err != nil {
		t.Fatalf("Trace() error = %v", err)
	}
	return len(evs) > 0
}

// TestHistoryBudget: over history.max_bytes, the archive-lock holder
// deletes history files, oldest first, until the history fits, whatever
// their window (a budget too small even for the window a peer's live file
// will be sealed into empties the history), never a live file: the peer's
// file sealed afterwards is history again. The deletions are counted, and
// the budget episode is logged once.
func TestHistoryBudget(t *testing.T) {
	t.Parallel()
	clk := newClock()
	shared := t.TempDir()
	hour := time.Hour.Milliseconds()
	ws := func(i int) int64 { return t0 - 1000 + int64(i)*hour }
	var sizes []int64
	for i := range 6 { // archives of six past hours
		sizes = append(sizes, writeHist(t, shared, "archive", ws(i), ws(i)+1000, ws(i)+30*60000, 64<<10))
	}
	clk.add(10 * time.Hour)
	// A peer runs with a live file begun 30 minutes ago (seal interval:
	// an hour); its window also holds an archive already.
	peerCfg := baseConfig(t, t.TempDir(), shared, "peer", clk)
	peerCfg.StartedAt = clk.now().Add(-30 * time.Minute)
	peerCfg.FullDetail = true // its event written at once, not after the summary hold
	peer := mustOpen(t, peerCfg)
	startRun(t, peer)
	peerWindow := peerCfg.StartedAt.UnixMilli() - peerCfg.StartedAt.UnixMilli()%hour
	current := writeHist(t, shared, "archive", peerWindow, peerWindow+1, peerWindow+2, 64<<10)

	logs := &logRecords{}
	cfg := baseConfig(t, t.TempDir(), shared, "holder", clk)
	cfg.ArchiveEnabled, cfg.Logger = true, slog.New(logs)
	cfg.MaxBytes = current + sizes[4] + sizes[5] + 100 // room for the two newest past hours
	r := mustOpen(t, cfg)
	if err := r.archivePass(t.Context()); err != nil {
		t.Fatalf("archivePass() = %v", err)
	}
	for i := range 6 {
		if got, want := traced(t, r, ws(i)+1000), i >= 4; got != want {
			t.Errorf("hour %d traced = %v, want %v (oldest windows deleted first)", i, got, want)
		}
	}
	if !traced(t, r, peerWindow+1) {
		t.Errorf("the archive of the peer's live window was deleted")
	}
	if s := r.Stats(); s.DeletedBudget != 4 || s.DeletedAge != 0 {
		t.Errorf("Stats() deleted %d for the budget and %d for age, want 4 and 0", s.DeletedBudget, s.DeletedAge)
	}
	if h := r.History(); h.Bytes > cfg.MaxBytes || h.OldestMs != ws(4)+1000 || !h.Retention || h.MaxBytes != cfg.MaxBytes {
		t.Errorf("History() = %+v, want at most %d bytes reaching back to %d", h, cfg.MaxBytes, ws(4)+1000)
	}

	// A budget below what the current window holds: everything goes, and
	// the episode is not logged again.
	r.cfg.MaxBytes = 1
	if err := r.archivePass(t.Context()); err != nil {
		t.Fatalf("second archivePass() = %v", err)
	}
	if traced(t, r, ws(5)+1000) || traced(t, r, peerWindow+1) {
		t.Errorf("under a 1-byte budget: hour 5 traced %v, peer window traced %v; want both deleted",
			traced(t, r, ws(5)+1000), traced(t, r, peerWindow+1))
	}
	clk.tick()
	peer.Event(event.Event{Type: event.TypeTaskReceived, TaskID: "live-task"})
	waitWritten(t, peer, 1, 0)
	seal(t, peer)
	if evs, _ := r.Trace(t.Context(), "live-task"); len(evs) != 1 {
		t.Errorf("the peer's live file, sealed after the passes, traces %d events, want 1", len(evs))
	}
	warns := logs.named("recorder_history_over_budget")
	if len(warns) != 1 || warns[0]["level"].String() != "WARN" || warns[0]["deleted_files"].Int64() != 4 {
		t.Errorf("recorder_history_over_budget logged %v, want once, with the 4 first deletions", warns)
	}
}

// TestHistoryMaxAge: windows whose newest data is older than
// history.max_age are deleted, counted as such, without a budget warning.
func TestHistoryMaxAge(t *testing.T) {
	t.Parallel()
	clk := newClock()
	shared := t.TempDir()
	clk.add(30 * 24 * time.Hour)
	day := 24 * time.Hour.Milliseconds()
	now := clk.nowMs()
	old, edge, young := now-8*day, now-7*day-2*time.Hour.Milliseconds(), now-6*day
	for _, from := range []int64{old, edge, young} {
		writeHist(t, shared, "archive", from-from%time.Hour.Milliseconds(), from, from+60000, 1<<10)
	}
	logs := &logRecords{}
	cfg := baseConfig(t, "", shared, "w", clk)
	cfg.ArchiveEnabled, cfg.Logger, cfg.MaxAge = true, slog.New(logs), 7*24*time.Hour
	r := mustOpen(t, cfg)
	if err := r.archivePass(t.Context()); err != nil {
		t.Fatal(err)
	}
	if traced(t, r, old) || traced(t, r, edge) || !traced(t, r, young) {
		t.Errorf("traced 8 days old %v, 7 days 2 h %v, 6 days %v; want false, false, true",
			traced(t, r, old), traced(t, r, edge), traced(t, r, young))
	}
	if s := r.Stats(); s.DeletedAge != 2 || s.DeletedBudget != 0 {
		t.Errorf("Stats() deleted %d for age and %d for the budget, want 2 and 0", s.DeletedAge, s.DeletedBudget)
	}
	if got := logs.named("recorder_history_deleted"); len(got) != 1 || got[0]["reason"].String() != "age" {
		t.Errorf("recorder_history_deleted logged %v, want once for age", got)
	}
	if got := logs.named("recorder_history_over_budget"); len(got) != 0 {
		t.Errorf("recorder_history_over_budget logged %v for an age deletion", got)
	}
	if h := r.History(); h.OldestMs != young {
		t.Errorf("History().OldestMs = %d, want %d", h.OldestMs, young)
	}
}

// TestBudgetEpisodeLoggedOnce: passes that keep deleting for the budget log
// recorder_history_over_budget once; once the history reaches back
// max_age within its budget the episode ends (INFO), and the next one is
// logged again.
func TestBudgetEpisodeLoggedOnce(t *testing.T) {
	t.Parallel()
	clk := newClock()
	shared := t.TempDir()
	hour := time.Hour.Milliseconds()
	logs := &logRecords{}
	cfg := baseConfig(t, "", shared, "w", clk)
	cfg.ArchiveEnabled, cfg.Logger, cfg.MaxAge = true, slog.New(logs), 24*time.Hour
	r := mustOpen(t, cfg)
	next := int64(t0 - 1000)
	addHours := func(n int) {
		for range n {
			size := writeHist(t, shared, "archive", next, next+1, next+2, 32<<10)
			r.cfg.MaxBytes = size * 5 / 2 // two windows fit, not three
			next += hour
		}
		clk.ms.Store(next + 3*hour)
	}
	pass := func() {
		t.Helper()
		if err := r.archivePass(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	addHours(4)
	pass()
	addHours(1)
	pass()
	if n := len(logs.named("recorder_history_over_budget")); n != 1 || r.Stats().DeletedBudget != 3 {
		t.Fatalf("two over-budget passes: %d warnings and %d deletions, want 1 and 3", n, r.Stats().DeletedBudget)
	}
	clk.add(2 * 24 * time.Hour) // the rest ages out: the budget no longer bounds the history
	pass()
	if n := len(logs.named("recorder_history_within_budget")); n != 1 {
		t.Fatalf("recorder_history_within_budget logged %d times, want once", n)
	}
	next = clk.nowMs() - 10*hour
	addHours(3)
	pass()
	if n := len(logs.named("recorder_history_over_budget")); n != 2 {
		t.Errorf("a new episode logged %d warnings in all, want 2", n)
	}
}

// TestBudgetNeverDeletesTheLiveFile: with storage.dir as the shared folder
// and a 1-byte budget, an archive pass deletes the worker's old sealed
// file but never its live file, which goes on recording.
func TestBudgetNeverDeletesTheLiveFile(t *testing.T) {
	t.Parallel()
	clk := newClock()
	dir := t.TempDir()
	cfg := baseConfig(t, dir, dir, "w", clk)
	cfg.ArchiveEnabled, cfg.MaxBytes = true, 1
	cfg.FullDetail = true // events written at once, not after the summary hold
	r := mustOpen(t, cfg)
	startRun(t, r)
	r.Event(event.Event{Type: event.TypeTaskReceived, TaskID: "old"})
	waitWritten(t, r, 1, 0)
	clk.add(time.Minute)
	seal(t, r)
	clk.add(3 * time.Hour) // the sealed file's window is no longer protected
	r.Event(event.Event{Type: event.TypeTaskReceived, TaskID: "new"})
	waitWritten(t, r, 2, 0)
	live, _ := filepath.Glob(filepath.Join(dir, "recorder", "w-*.db"))
	if err := r.archivePass(t.Context()); err != nil {
		t.Fatal(err)
	}
	if r.Stats().DeletedBudget != 1 {
		t.Errorf("DeletedBudget = %d, want the sealed file deleted", r.Stats().DeletedBudget)
	}
	if len(live) != 1 || !fileExists(live[0]) {
		t.Fatalf("live file %v gone after the pass", live)
	}
	r.Event(event.Event{Type: event.TypeTaskReceived, TaskID: "newer"})
	waitWritten(t, r, 3, 0)
	for _, task := range []string{"new", "newer"} {
		if evs, err := r.Trace(t.Context(), task); err != nil || len(evs) != 1 {
			t.Errorf("Trace(%s) = %d events, %v; want the live file's event", task, len(evs), err)
		}
	}
}

// TestLiveSizeSealRetriesSlowly: a live file that outgrew its size but
// cannot be sealed (here history/c1 is a symlink) keeps recording and is
// not tried again after every transaction: one failure, not a flood of
// them.
func TestLiveSizeSealRetriesSlowly(t *testing.T) {
	t.Parallel()
	clk := newClock()
	dir, shared := t.TempDir(), t.TempDir()
	os.MkdirAll(filepath.Join(shared, "history"), 0o700)
	if err := os.Symlink(t.TempDir(), filepath.Join(shared, "history", "c1")); err != nil {
		t.Fatal(err)
	}
	logs := &logRecords{}
	cfg := baseConfig(t, dir, shared, "w", clk)
	// Above a fresh live file with its schema (about 100 KiB of WAL).
	cfg.LiveMaxBytes, cfg.Logger = 256<<10, slog.New(logs)
	cfg.FullDetail = true // events written at once, not after the summary hold
	r := mustOpen(t, cfg)
	startRun(t, r)
	payload := json.RawMessage(`{"stdout_tail":"` + strings.Repeat("x", 1000) + `"}`)
	for range 400 {
		r.Event(event.Event{Type: event.TypeExecutorFinished, TaskID: "t", Payload: payload})
	}
	waitWritten(t, r, 400, 0)
	waitStats(t, r, "a failed seal for size", func(s Stats) bool { return s.SealErrors >= 1 })
	for range 400 { // many more transactions, each followed by a size check
		r.Event(event.Event{Type: event.TypeExecutorFinished, TaskID: "t", Payload: payload})
	}
	waitWritten(t, r, 800, 0)
	if s := r.Stats(); s.SealErrors != 1 || s.Seals != 0 {
		t.Errorf("Stats() = %d seal errors and %d seals after 800 events, want 1 and 0", s.SealErrors, s.Seals)
	}
	if n := len(logs.named("recorder_seal_failed")); n != 1 {
		t.Errorf("recorder_seal_failed logged %d times, want once", n)
	}
	r.Event(event.Event{Type: event.TypeTaskReceived, TaskID: "after"})
	waitWritten(t, r, 801, 0)
	if evs, err := r.Events(t.Context(), EventQuery{TaskID: "after"}); err != nil || len(evs) != 1 {
		t.Errorf("Events(after) = %v, %v; want the live file still recording", evs, err)
	}
}
