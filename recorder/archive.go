package recorder

import (
	"context"
	"database/sql"
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

// maxFoldInflateBytes caps what an existing archive may decompress to when
// new sealed files are folded into it (16 GiB): the archive comes from the
// shared folder, so its inflated size is bounded here. Beyond it the
// window's sealed files stay sealed and the pass reports ErrArchiveTooLarge.
const maxFoldInflateBytes = 16 << 30

// maxRetentionDays is the longest merged_retention_days taken literally
// (100 years); larger values mean the same, so nothing overflows.
const maxRetentionDays = 36500

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

// archivePass removes expired merge results and, holding the cluster's
// archive lock, applies the history's retention: windows past MaxAge are
// deleted, the sealed files whose to_ms is older than ArchiveAfter are
// folded into their window archives, then the oldest windows are deleted
// while the history is over MaxBytes. It does nothing while another
// worker holds the lock, and nothing at all while archiving is off: then no
// file is ever deleted automatically.
func (r *Recorder) archivePass(ctx context.Context) error {
	if r.sharedRoot == "" || !r.cfg.ArchiveEnabled {
		return nil
	}
	errs := []error{r.removeExpiredMerged()}
	defer r.measure()
	due, err := r.passDue()
	if err != nil || !due {
		return errors.Join(append(errs, err)...)
	}
	lock, err := r.acquireArchiveLock()
	if err != nil || lock == nil {
		return errors.Join(append(errs, err)...)
	}
	defer lock.release()
	r.cleanHistoryTemps(lock.dir)
	// Listed again under the lock: the last holder may have folded some.
	files, err := listIn(lock.dir, r.histSegs(), true)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	files = r.expireByAge(lock.dir, files)
	byWindow := map[int64][]histFile{}
	windowMs := r.cfg.ArchiveWindow.Milliseconds()
	for _, f := range r.archivable(files) {
		ws := f.meta.FromMs - f.meta.FromMs%windowMs
		byWindow[ws] = append(byWindow[ws], f)
	}
	for _, ws := range slices.Sorted(maps.Keys(byWindow)) {
		if ctx.Err() != nil || !lock.refresh() {
			break
		}
		if err := r.foldWindow(ctx, lock.dir, ws, byWindow[ws]); err != nil {
			errs = append(errs, err)
		}
	}
	if ctx.Err() == nil && lock.refresh() {
		if files, err = listIn(lock.dir, r.histSegs(), true); err != nil {
			return errors.Join(append(errs, err)...)
		}
		r.enforceBudget(lock.dir, files)
	}
	return errors.Join(errs...)
}

// passDue reports whether the history folder has sealed files to archive
// or windows to delete; a missing folder has neither.
func (r *Recorder) passDue() (bool, error) {
	d, err := r.openShared(false, false, r.histSegs()...)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("list: %w", err)
	}
	defer d.close()
	files, err := listIn(d, r.histSegs(), true)
	if err != nil {
		return false, err
	}
	return len(r.archivable(files)) > 0 || r.retentionDue(d, files), nil
}

// archivable returns the sealed files older than ArchiveAfter (files is
// left as it is).
func (r *Recorder) archivable(files []histFile) []histFile {
	cutoff := r.cfg.Now().Add(-r.cfg.ArchiveAfter).UnixMilli()
	return slices.DeleteFunc(slices.Clone(files), func(f histFile) bool {
		return f.shape != shapeSealed || f.meta.ToMs <= 0 || f.meta.ToMs >= cutoff || f.meta.FromMs < 0
	})
}

// foldWindow adds files to <cluster>-<ws>.db.gz in hist (the history folder,
// opened without symlinks): the archive (if any) is decompressed into a
// private work file, the files are appended, the result is compressed to a
// temp file in hist and renamed over the archive. Only then are the folded
// files and their .meta.json removed, through hist.
func (r *Recorder) foldWindow(ctx context.Context, hist *dir, ws int64, files []histFile) error {
	name := fmt.Sprintf("%s-%d.db.gz", r.cfg.Cluster, ws)
	scratch, err := r.scratch()
	if err != nil {
		return err
	}
	defer scratch.close()
	work := filepath.Join(scratch.path, ".fold-"+r.cfg.Worker+"-"+randToken(6)+".db.tmp")
	defer removeDB(work)
	if err := inflateArchive(ctx, hist, name, work); err != nil {
		return err
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
	var folded []histFile
	for _, f := range files {
		if err := r.foldOne(ctx, db, hist, f); err != nil {
			return fmt.Errorf("fold %s: %w", f.rel, err)
		}
		folded = append(folded, f)
		if meta.FromMs == 0 || f.meta.FromMs < meta.FromMs {
			meta.FromMs = f.meta.FromMs
		}
		meta.ToMs = max(meta.ToMs, f.meta.ToMs)
	}
	if meta.Events, meta.Tasks, err = countRows(ctx, db); err != nil {
		return fmt.Errorf("count %s: %w", name, err)
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
	gzTmp := tempBase(name)
	out, err := hist.create(gzTmp)
	if err != nil {
		return fmt.Errorf("compress to %s: %w", name, err)
	}
	if err := gzipInto(work, out); err != nil {
		hist.remove(gzTmp)
		return err
	}
	data, _ := json.MarshalIndent(meta, "", "  ")
	if err := hist.writeAtomic(name+".meta.json", data); err != nil {
		hist.remove(gzTmp)
		return err
	}
	if err := hist.rename(gzTmp, hist, name); err != nil {
		hist.remove(gzTmp)
		return fmt.Errorf("replace %s: %w", name, err)
	}
	hist.sync()
	for _, f := range folded {
		base := f.segs[len(f.segs)-1]
		hist.remove(base)
		hist.remove(base + ".meta.json")
		r.stats.archivedFiles.Add(1)
	}
	r.log.Info("recorder_archived", "archive", hist.rel+"/"+name, "files", len(folded))
	return nil
}

// foldOne copies one sealed file, opened through hist, into db.
func (r *Recorder) foldOne(ctx context.Context, db *sql.DB, hist *dir, f histFile) error {
	base := f.segs[len(f.segs)-1]
	src, _, err := hist.openFile(base)
	if err != nil {
		return err
	}
	defer src.Close()
	uri, done, err := r.vfs.uri(src)
	if err != nil {
		return err
	}
	defer done()
	_, err = copyFrom(ctx, db, uri, base)
	return err
}

// inflateArchive decompresses the archive name of hist, if it exists, into
// a new 0600 file at work, at most maxFoldInflateBytes.
func inflateArchive(ctx context.Context, hist *dir, name, work string) error {
	src, _, err := hist.openFile(name)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("decompress %s: %w", name, err)
	}
	defer src.Close()
	out, err := os.OpenFile(work, os.O_CREATE|os.O_EXCL|os.O_WRONLY, fileMode)
	if err != nil {
		return fmt.Errorf("decompress to %s: %w", filepath.Base(work), err)
	}
	_, err = inflateTo(ctx, out, src, maxFoldInflateBytes)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("decompress %s: %w", name, err)
	}
	return nil
}

// cleanHistoryTemps removes hidden temp files an interrupted seal or archive
// pass left in the cluster folder, once they are a lease old.
func (r *Recorder) cleanHistoryTemps(hist *dir) {
	names, _ := hist.names()
	for _, name := range names {
		if !strings.HasPrefix(name, ".") || !(strings.HasSuffix(name, ".tmp") || strings.HasSuffix(name, ".stale")) {
			continue
		}
		if fi, err := hist.stat(name); err == nil && r.cfg.Now().Sub(fi.ModTime()) > 2*archiveLease {
			hist.remove(name)
		}
	}
}

// removeExpiredMerged deletes merge results older than MergedRetentionDays,
// dated by the <ts> in their name (the file's mtime when it has none). The
// merged folder is opened without following a symlink, so a merged/ that
// points elsewhere is refused (ErrUnsafePath) and nothing is deleted there.
func (r *Recorder) removeExpiredMerged() error {
	d, err := r.openShared(false, false, "merged")
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("merge retention: %w", err)
	}
	defer d.close()
	files, err := listIn(d, []string{"merged"}, false)
	if err != nil {
		return fmt.Errorf("merge retention: %w", err)
	}
	// Clamped so a huge retention means "never", not an overflow that
	// expires everything.
	days := min(r.cfg.MergedRetentionDays, maxRetentionDays)
	cutoff := r.cfg.Now().Add(-time.Duration(days) * 24 * time.Hour)
	for _, f := range files {
		born := f.modTime
		if f.meta.FromMs > 0 {
			born = time.UnixMilli(f.meta.FromMs)
		}
		if born.Before(cutoff) {
			name := f.segs[len(f.segs)-1]
			d.remove(name)
			d.remove(name + ".meta.json")
			r.stats.mergedRemoved.Add(1)
		}
	}
	return nil
}
