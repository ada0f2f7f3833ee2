package recorder

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// archiveLoop runs an archive pass every quarter window (1s-15m).
func (r *Recorder) archiveLoop(ctx context.Context) {
	t := time.NewTicker(min(max(r.cfg.ArchiveWindow/4, time.Second), 15*time.Minute))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := r.archivePass(ctx); err != nil && ctx.Err() == nil {
				r.stats.archiveErrors.Add(1)
				r.log.Error("recorder_archive_failed", "error", err)
			}
		}
	}
}

// archivePass removes expired merge results, then folds this cluster's
// sealed files whose to_ms is older than ArchiveAfter into their window
// archives, holding the cluster's archive lock. It does nothing while
// another worker holds the lock.
func (r *Recorder) archivePass(ctx context.Context) error {
	if r.sharedRoot == "" {
		return nil
	}
	r.removeExpiredMerged()
	if len(r.archivable()) == 0 {
		return nil
	}
	lock, err := r.acquireArchiveLock()
	if err != nil || lock == nil {
		return err
	}
	defer lock.release()
	r.cleanHistoryTemps()
	byWindow := map[int64][]histFile{}
	windowMs := r.cfg.ArchiveWindow.Milliseconds()
	for _, f := range r.archivable() { // listed again: the last holder may have folded some
		ws := f.meta.FromMs - f.meta.FromMs%windowMs
		byWindow[ws] = append(byWindow[ws], f)
	}
	var errs []error
	for _, ws := range slices.Sorted(maps.Keys(byWindow)) {
		if ctx.Err() != nil || !lock.refresh() {
			break
		}
		if err := r.foldWindow(ctx, ws, byWindow[ws]); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// archivable lists sealed files older than ArchiveAfter.
func (r *Recorder) archivable() []histFile {
	files, err := r.listDir(r.historyDir, true)
	if err != nil {
		return nil
	}
	cutoff := r.cfg.Now().Add(-r.cfg.ArchiveAfter).UnixMilli()
	return slices.DeleteFunc(files, func(f histFile) bool {
		return f.shape != shapeSealed || f.meta.ToMs <= 0 || f.meta.ToMs >= cutoff || f.meta.FromMs < 0
	})
}

// foldWindow adds files to history/<cluster>/<cluster>-<ws>.db.gz: the
// archive (if any) is decompressed to a temp file, the files are appended,
// the result is compressed to a temp file and renamed over the archive.
// Only then are the folded files and their .meta.json removed.
func (r *Recorder) foldWindow(ctx context.Context, ws int64, files []histFile) error {
	archive := filepath.Join(r.historyDir, fmt.Sprintf("%s-%d.db.gz", r.cfg.Cluster, ws))
	work := tempName(strings.TrimSuffix(archive, ".gz"))
	defer removeDB(work)
	if _, err := os.Stat(archive); err == nil {
		if err := inflateFile(archive, work); err != nil {
			return err
		}
	}
	db, err := openBuildDB(ctx, work)
	if err != nil {
		return err
	}
	defer db.Close()
	meta := fileMeta{Kind: "archive", Cluster: r.cfg.Cluster, Format: FormatVersion}
	if m, err := readMeta(ctx, db); err == nil {
		meta.FromMs, _ = strconv.ParseInt(m["from_ms"], 10, 64)
		meta.ToMs, _ = strconv.ParseInt(m["to_ms"], 10, 64)
	}
	for _, f := range files {
		if _, err := copyFrom(ctx, db, f.path, filepath.Base(f.path)); err != nil {
			return fmt.Errorf("fold %s: %w", f.rel, err)
		}
		if meta.FromMs == 0 || f.meta.FromMs < meta.FromMs {
			meta.FromMs = f.meta.FromMs
		}
		meta.ToMs = max(meta.ToMs, f.meta.ToMs)
	}
	if meta.Events, meta.Tasks, err = countRows(ctx, db); err != nil {
		return fmt.Errorf("count %s: %w", filepath.Base(archive), err)
	}
	err = setMeta(ctx, db, "format", strconv.Itoa(FormatVersion), "kind", "archive", "cluster", r.cfg.Cluster,
		"window_start_ms", strconv.FormatInt(ws, 10), "window_ms", strconv.FormatInt(r.cfg.ArchiveWindow.Milliseconds(), 10),
		"from_ms", strconv.FormatInt(meta.FromMs, 10), "to_ms", strconv.FormatInt(meta.ToMs, 10))
	if err != nil {
		return err
	}
	if err := db.Close(); err != nil {
		return fmt.Errorf("close %s: %w", filepath.Base(work), err)
	}
	gz := tempName(archive)
	if err := gzipFile(work, gz); err != nil {
		return err
	}
	data, _ := json.MarshalIndent(meta, "", "  ")
	if err := writeFileAtomic(archive+".meta.json", data); err != nil {
		os.Remove(gz)
		return err
	}
	if err := os.Rename(gz, archive); err != nil {
		os.Remove(gz)
		return fmt.Errorf("replace %s: %w", filepath.Base(archive), err)
	}
	syncDir(r.historyDir)
	for _, f := range files {
		os.Remove(f.path)
		os.Remove(f.path + ".meta.json")
		r.stats.archivedFiles.Add(1)
	}
	r.log.Info("recorder_archived", "archive", relSlash(r.sharedRoot, archive), "files", len(files))
	return nil
}

// inflateFile decompresses a .db.gz into a new 0600 file.
func inflateFile(src, dst string) error {
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, fileMode)
	if err != nil {
		return fmt.Errorf("decompress to %s: %w", filepath.Base(dst), err)
	}
	err = inflateTo(out, src)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("decompress %s: %w", filepath.Base(src), err)
	}
	return nil
}

// cleanHistoryTemps removes hidden temp files an interrupted seal or archive
// pass left in the cluster folder, once they are a lease old.
func (r *Recorder) cleanHistoryTemps() {
	entries, _ := os.ReadDir(r.historyDir)
	for _, e := range entries {
		name := e.Name()
		if !strings.HasPrefix(name, ".") || !(strings.HasSuffix(name, ".tmp") || strings.HasSuffix(name, ".stale")) {
			continue
		}
		if fi, err := e.Info(); err == nil && r.cfg.Now().Sub(fi.ModTime()) > 2*archiveLease {
			os.Remove(filepath.Join(r.historyDir, name))
		}
	}
}

// removeExpiredMerged deletes merge results older than MergedRetentionDays,
// dated by the <ts> in their name (the file's mtime when it has none).
func (r *Recorder) removeExpiredMerged() {
	dir := filepath.Join(r.sharedRoot, "merged")
	files, _ := r.listDir(dir, false)
	cutoff := r.cfg.Now().Add(-time.Duration(r.cfg.MergedRetentionDays) * 24 * time.Hour)
	for _, f := range files {
		born := f.modTime
		if f.meta.FromMs > 0 {
			born = time.UnixMilli(f.meta.FromMs)
		}
		if born.Before(cutoff) {
			os.Remove(f.path)
			os.Remove(f.path + ".meta.json")
			r.stats.mergedRemoved.Add(1)
		}
	}
}
