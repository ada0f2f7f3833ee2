package recorder

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"zombiezen.com/go/sqlite"
)

// recoverOrphans seals live files an earlier run of this worker left in
// {Dir}/recorder and removes its stale temp files, returning the highest
// event ID found. What cannot be opened, a damaged WAL (walDamage) or a
// non-file under a live file's name goes to the quarantine folder; a file
// that fails for another reason stays for the next start.
func (r *Recorder) recoverOrphans(ctx context.Context) (int64, error) {
	entries, err := os.ReadDir(r.liveDir)
	if err != nil {
		return 0, fmt.Errorf("list %s: %w", r.liveDir, err)
	}
	var maxID int64
	for _, e := range entries {
		name := e.Name()
		// Only this worker's leftovers: storage.dir may be shared by a fleet.
		if leftover(name, r.cfg.Worker) {
			os.RemoveAll(filepath.Join(r.liveDir, name))
			continue
		}
		fromMs, ok := parseLiveName(name, r.cfg.Worker)
		if !ok {
			continue
		}
		if !e.Type().IsRegular() {
			// A folder or a symlink would be skipped at every start for ever.
			what := "a directory"
			if e.Type()&os.ModeSymlink != 0 {
				what = "a symlink"
			} else if !e.IsDir() {
				what = "a special file"
			}
			r.quarantineOrphan(name, "not a regular file but "+what, 0, "")
			continue
		}
		path := filepath.Join(r.liveDir, name)
		id, err := r.recoverOne(ctx, path, fromMs)
		if err != nil {
			r.log.Error("recorder_recover_failed", "file", name, "error", err)
			continue
		}
		maxID = max(maxID, id)
	}
	return maxID, nil
}

// quarantineOrphan moves the live file name (with its WAL) to the
// quarantine folder and logs it; copied, when set, is the path a copy
// already went to.
func (r *Recorder) quarantineOrphan(name, reason string, saved int64, copied string, args ...any) {
	rel := copied
	if rel == "" {
		var err error
		if rel, err = r.quarantineLive(name, false); err != nil {
			r.log.Error("recorder_quarantine_failed", "file", name, "reason", reason, "error", err)
			return
		}
	}
	r.log.Warn("recorder_quarantined", append([]any{"file", rel, "from", "recorder/" + name, "reason", reason,
		"saved_rows", saved}, append(args, "detail", quarantineDetail)...)...)
}

// recoverOne seals one orphaned live file (to_ms: its newest row), copying
// a damaged WAL to the quarantine folder first.
func (r *Recorder) recoverOne(ctx context.Context, path string, fromMs int64) (int64, error) {
	name := filepath.Base(path)
	damage, err := walDamage(path + "-wal")
	if err != nil {
		return 0, fmt.Errorf("read %s-wal: %w", name, err)
	}
	copied := ""
	if damage != "" {
		if copied, err = r.quarantineLive(name, true); err != nil {
			// Not recovered either: what SQLite would drop stays on disk.
			return 0, err
		}
	}
	// Opening in WAL mode replays a WAL the dead process left behind.
	db, err := openLiveDB(ctx, path)
	if err != nil {
		return 0, r.unreadableOrphan(name, damage, copied, err)
	}
	var maxID, rows, toMs int64 // max(id) of no events: NULL, read as 0
	err = withPool(ctx, db, func(c *sqlite.Conn) error {
		return queryInts(c, `SELECT
		(SELECT max(id) FROM events),
		(SELECT count(*) FROM events) + (SELECT count(*) FROM tasks),
		max(coalesce((SELECT max(ts_ms) FROM events), 0), coalesce((SELECT max(ts_ms) FROM tasks), 0))`, &maxID, &rows, &toMs)
	})
	db.Close()
	if err != nil {
		return 0, r.unreadableOrphan(name, damage, copied, fmt.Errorf("inspect %s: %w", name, err))
	}
	if rows == 0 {
		removeDB(path)
		if copied != "" {
			r.quarantineOrphan(name, damage, 0, copied)
		}
		return 0, nil
	}
	sealed, err := r.sealFile(ctx, path, r.cfg.Worker, fromMs, max(toMs, fromMs))
	if err != nil {
		return 0, err
	}
	r.stats.seals.Add(1)
	r.addRecent(sealed)
	hist := "history/" + r.cfg.Cluster + "/" + sealed
	if copied != "" {
		r.quarantineOrphan(name, damage, rows, copied, "sealed", hist)
	} else {
		r.log.Warn("recorder_recovered", "file", hist, "rows", rows)
	}
	return maxID, nil
}

// unreadableOrphan quarantines a live file SQLite found corrupt or not a
// database (the error is dropped); any other error is returned.
func (r *Recorder) unreadableOrphan(name, damage, copied string, err error) error {
	if !notDatabase(err) {
		return err
	}
	reason := err.Error()
	if damage != "" {
		reason = damage + "; " + reason
	}
	if copied != "" {
		// The copy is the quarantined file: the unreadable original goes.
		removeDB(filepath.Join(r.liveDir, name))
	}
	r.quarantineOrphan(name, reason, 0, copied)
	return nil
}

// leftover reports whether name is a temp file or folder of this worker
// that only lives while the process runs.
func leftover(name, worker string) bool {
	for _, kind := range []string{".snapshot-", ".gzcache-", ".merge-", ".fold-"} {
		if strings.HasPrefix(name, kind+worker+"-") {
			return true
		}
	}
	return false
}

// parseLiveName matches "<worker>-<start_ms>.db" for this worker.
func parseLiveName(name, worker string) (int64, bool) {
	rest, ok := strings.CutPrefix(name, worker+"-")
	if !ok {
		return 0, false
	}
	digits, ok := strings.CutSuffix(rest, ".db")
	if !ok || !allDigits(digits) {
		return 0, false
	}
	ms, err := strconv.ParseInt(digits, 10, 64)
	return ms, err == nil
}

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
