package recorder

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// recoverOrphans seals live files an earlier run of this worker left in
// {Dir}/recorder (it died before sealing them) and removes its stale
// snapshot, archive-cache, merge and fold temp files. It returns the highest event ID found, so new IDs stay above it.
// A file that cannot be recovered is logged and left in place.
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
		if !ok || !e.Type().IsRegular() {
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

// recoverOne seals one orphaned live file; its to_ms is its newest row.
func (r *Recorder) recoverOne(ctx context.Context, path string, fromMs int64) (int64, error) {
	// Opening in WAL mode replays a WAL the dead process left behind.
	db, err := openLiveDB(ctx, path)
	if err != nil {
		return 0, err
	}
	var maxID, rows, toMs sql.NullInt64
	err = db.QueryRowContext(ctx, `SELECT
		(SELECT max(id) FROM events),
		(SELECT count(*) FROM events) + (SELECT count(*) FROM tasks),
		max(coalesce((SELECT max(ts_ms) FROM events), 0), coalesce((SELECT max(ts_ms) FROM tasks), 0))`).
		Scan(&maxID, &rows, &toMs)
	db.Close()
	if err != nil {
		return 0, fmt.Errorf("inspect %s: %w", filepath.Base(path), err)
	}
	if rows.Int64 == 0 {
		removeDB(path)
		return 0, nil
	}
	name, err := r.sealFile(ctx, path, r.cfg.Worker, fromMs, max(toMs.Int64, fromMs))
	if err != nil {
		return 0, err
	}
	r.stats.seals.Add(1)
	r.addRecent(name)
	r.log.Warn("recorder_recovered", "file", "history/"+r.cfg.Cluster+"/"+name, "rows", rows.Int64)
	return maxID.Int64, nil
}

// leftover reports whether name is a temp file or folder of this worker
// that only lives while the process runs: live snapshots, the archive
// cache, merge and fold build files.
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
