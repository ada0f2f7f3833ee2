package recorder

import (
	"cmp"
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

	"zombiezen.com/go/sqlite"
)

// archivePartBytes is how much an archive part holds, inflated, before the
// window's next sealed files start a new part: a trace inflates one part
// at a time, and a fold never rewrites more than this (or one larger
// sealed file).
const archivePartBytes = 128 << 20

// foldRoomStep is how much of a new archive part is written at a time once
// room was made for it in the history's budget (see makeRoom).
const foldRoomStep = 1 << 20

// foldShare is the share of one core an archive pass may use (see pacer).
const foldShare = 0.5

// maxRetentionDays is the longest merged_retention_days taken literally
// (100 years), so nothing overflows.
const maxRetentionDays = 36500

// archivePass removes expired merge results and, holding the cluster's
// archive lock, deletes windows past MaxAge, folds the sealed files older
// than ArchiveAfter into their window's archives, then enforces MaxBytes.
// With archiving off it does nothing: no file is deleted automatically.
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
	parts := map[int64][]histFile{}
	for _, f := range files {
		if f.shape == shapeArchive && f.part >= 0 {
			parts[f.window] = append(parts[f.window], f)
		}
	}
	for _, ws := range slices.Sorted(maps.Keys(byWindow)) {
		if ctx.Err() != nil {
			break
		}
		if err := r.foldWindow(ctx, lock, ws, byWindow[ws], parts[ws]); err != nil {
			errs = append(errs, err)
		}
	}
	if ctx.Err() == nil && lock.refresh() {
		if files, err = listIn(lock.dir, r.histSegs(), true); err != nil {
			return errors.Join(append(errs, err)...)
		}
		r.makeRoom(lock.dir, files, 0, nil)
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

// archivable returns the sealed files older than ArchiveAfter (a new slice).
func (r *Recorder) archivable(files []histFile) []histFile {
	cutoff := r.cfg.Now().Add(-r.cfg.ArchiveAfter).UnixMilli()
	return slices.DeleteFunc(slices.Clone(files), func(f histFile) bool {
		return f.shape != shapeSealed || f.meta.ToMs <= 0 || f.meta.ToMs >= cutoff || f.meta.FromMs < 0
	})
}

// foldWindow folds files, the archivable sealed files of window ws, oldest
// first, into the newest of the window's parts while it holds less than
// archivePartBytes inflated, then into new parts of at most that size (or
// one larger file). The lock is refreshed before each part; work is paced.
func (r *Recorder) foldWindow(ctx context.Context, lock *archiveLock, ws int64, files, parts []histFile) error {
	slices.SortFunc(files, func(a, b histFile) int {
		return cmp.Or(cmp.Compare(a.meta.FromMs, b.meta.FromMs), strings.Compare(a.rel, b.rel))
	})
	next := 0
	var last *histFile
	for i := range parts {
		if p := &parts[i]; last == nil || p.part > last.part {
			last = p
		}
	}
	if last != nil {
		next = last.part + 1
	}
	extend := last != nil && last.meta.InflatedBytes > 0 && last.meta.InflatedBytes < r.partBytes
	pace := newPacer(foldShare)
	for len(files) > 0 {
		if ctx.Err() != nil || !lock.refresh() {
			return ctx.Err()
		}
		var name string
		size := int64(0)
		if extend && last.meta.InflatedBytes+files[0].size <= r.partBytes {
			name, size = last.segs[len(last.segs)-1], last.meta.InflatedBytes
		} else {
			extend = false
			for name = archiveName(r.cfg.Cluster, ws, next); lock.dir.exists(name); name = archiveName(r.cfg.Cluster, ws, next) {
				next++
			}
			next++
		}
		n := 1
		for size += files[0].size; n < len(files) && size+files[n].size <= r.partBytes; n++ {
			size += files[n].size
		}
		err := r.foldPart(ctx, lock.dir, ws, name, extend, files[:n], pace)
		if err != nil && extend && ctx.Err() == nil {
			// The part could not be extended: the files start a new part.
			r.log.Warn("recorder_archive_part_skipped", "archive", lock.dir.rel+"/"+name, "error", err)
			extend = false
			continue
		}
		if err != nil {
			return err
		}
		extend = false
		files = files[n:]
	}
	return nil
}

// foldPart adds files to the archive name of hist (extend: starting from
// its inflated content), compresses the result to a temp file in hist and
// renames it over or in as the archive, after its .meta.json and .idx.
// Only then are the folded files and their .meta.json removed.
func (r *Recorder) foldPart(ctx context.Context, hist *dir, ws int64, name string, extend bool, files []histFile, pace *pacer) error {
	scratch, err := r.scratch()
	if err != nil {
		return err
	}
	defer scratch.close()
	workName := ".fold-" + r.cfg.Worker + "-" + randToken(6) + ".db.tmp"
	work := filepath.Join(scratch.path, workName)
	defer removeDB(work)
	adopted := false
	if extend {
		if err := inflateArchive(ctx, hist, name, work, pace); err != nil {
			return err
		}
	} else {
		adopted = adoptSealed(ctx, hist, scratch, workName, files[0])
	}
	db, err := openBuildDB(ctx, work)
	if err != nil {
		return err
	}
	defer db.Close()
	meta := fileMeta{Kind: "archive", Cluster: r.cfg.Cluster, Format: FormatVersion}
	meta.FromMs, meta.ToMs = metaSpan(db, "main")
	folded := make([]histFile, 0, len(files))
	for i, f := range files {
		if i > 0 || !adopted {
			err := r.foldOne(ctx, db, hist, f)
			switch {
			case err == nil:
			case errors.Is(err, os.ErrNotExist) && ctx.Err() == nil:
				continue // deleted meanwhile for the budget (see makeRoom)
			case notDatabase(err) && ctx.Err() == nil:
				// Set aside, once, so it does not hold up its window.
				r.quarantineShared(hist, f, err)
				continue
			default:
				return fmt.Errorf("fold %s: %w", f.rel, err)
			}
		}
		folded = append(folded, f)
		pace.rest(ctx)
		if meta.FromMs == 0 || f.meta.FromMs < meta.FromMs {
			meta.FromMs = f.meta.FromMs
		}
		meta.ToMs = max(meta.ToMs, f.meta.ToMs)
	}
	if len(folded) == 0 {
		return nil // nothing left to add
	}
	files = folded
	if meta.Events, meta.Tasks, err = countRows(db); err != nil {
		return fmt.Errorf("count %s: %w", name, err)
	}
	if meta.Sources, err = texts(db, `SELECT name FROM sources ORDER BY name`); err != nil {
		return fmt.Errorf("list sources of %s: %w", name, err)
	}
	err = setMeta(db, "format", strconv.Itoa(FormatVersion), "kind", "archive", "cluster", r.cfg.Cluster,
		"window_start_ms", strconv.FormatInt(ws, 10), "window_ms", strconv.FormatInt(r.cfg.ArchiveWindow.Milliseconds(), 10),
		"from_ms", strconv.FormatInt(meta.FromMs, 10), "to_ms", strconv.FormatInt(meta.ToMs, 10))
	if err != nil {
		return err
	}
	hashes, err := indexKeys(db)
	if err != nil {
		return fmt.Errorf("index %s: %w", name, err)
	}
	if err := db.Close(); err != nil {
		return fmt.Errorf("close %s: %w", filepath.Base(work), err)
	}
	fi, err := os.Stat(work)
	if err != nil {
		return err
	}
	meta.InflatedBytes = fi.Size()
	gzTmp := tempBase(name)
	out, err := hist.create(gzTmp)
	if err != nil {
		return fmt.Errorf("compress to %s: %w", name, err)
	}
	defer hist.remove(gzTmp) // gone once renamed into place
	// Room is made as the archive grows, never at the expense of the
	// files it holds.
	keep := map[string]bool{name: true}
	for _, f := range files {
		keep[f.segs[len(f.segs)-1]] = true
	}
	step := min(foldRoomStep, max(r.cfg.MaxBytes/64, 64<<10))
	grow := func(size int64) { r.makeRoom(hist, nil, size+2*metaAllowance, keep) }
	if err := gzipInto(ctx, work, out, pace, step, grow); err != nil {
		return err
	}
	data, _ := json.MarshalIndent(meta, "", "  ")
	if err := hist.writeAtomic(name+".meta.json", data); err != nil {
		return err
	}
	if err := writeIndex(hist, gzTmp, name, hashes); err != nil {
		return err
	}
	if err := hist.rename(gzTmp, hist, name); err != nil {
		return fmt.Errorf("replace %s: %w", name, err)
	}
	hist.sync()
	for _, f := range files {
		base := f.segs[len(f.segs)-1]
		hist.remove(base)
		hist.remove(base + ".meta.json")
		r.stats.archivedFiles.Add(1)
	}
	r.log.Info("recorder_archived", "archive", hist.rel+"/"+name, "files", len(files), "inflated_bytes", meta.InflatedBytes)
	return nil
}

// adoptSealed starts a new archive part at scratch/work from a copy of the
// sealed file f, far cheaper than copying its rows, when the copy has
// exactly this build's schema (adoptDB). False, with nothing left at work,
// when it has not: the caller copies the rows instead.
func adoptSealed(ctx context.Context, hist *dir, scratch *dir, work string, f histFile) bool {
	path, base := filepath.Join(scratch.path, work), f.segs[len(f.segs)-1]
	if copyAt(hist, base, scratch, work) == nil && adoptDB(ctx, path, base) == nil {
		return true
	}
	removeDB(path)
	return false
}

// adoptDB checks the copy's schema objects against ours, drops its worker
// meta key and records source in sources.
func adoptDB(ctx context.Context, path, source string) error {
	db, err := openConn(ctx, sqliteURI(path, ""), sqlite.OpenReadWrite)
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetBusyTimeout(5 * time.Second)
	if err := execSQL(db, `PRAGMA trusted_schema=0`); err != nil {
		return err
	}
	if err := checkVersion(db, "main"); err != nil {
		return err
	}
	got, err := texts(db, `SELECT type || ' ' || name FROM sqlite_master ORDER BY 1`)
	if err != nil {
		return err
	}
	ref, err := openConn(ctx, "file::memory:", sqlite.OpenReadWrite|sqlite.OpenMemory)
	if err != nil {
		return err
	}
	defer ref.Close()
	if err := migrate(ref); err != nil {
		return err
	}
	want, err := texts(ref, `SELECT type || ' ' || name FROM sqlite_master ORDER BY 1`)
	if err != nil {
		return err
	}
	if !slices.Equal(got, want) {
		return fmt.Errorf("schema objects %v, want %v", got, want)
	}
	err = execSQL(db, `PRAGMA journal_mode=DELETE`)
	if err == nil {
		err = execSQL(db, `DELETE FROM meta WHERE key = 'worker'`)
	}
	if err == nil {
		err = execSQL(db, `INSERT OR IGNORE INTO sources(name) VALUES(?)`, source)
	}
	return errors.Join(err, db.Close())
}

func texts(c *sqlite.Conn, q string) ([]string, error) {
	var out []string
	err := query(c, q, func(st *sqlite.Stmt) error { out = append(out, st.ColumnText(0)); return nil })
	return out, err
}

// foldOne copies one sealed file, opened through hist, into db.
func (r *Recorder) foldOne(ctx context.Context, db *sqlite.Conn, hist *dir, f histFile) error {
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
	_, err = copyFrom(db, uri, base)
	return err
}

// inflateArchive decompresses the archive name of hist into a new 0600
// file at work, at most MaxInflatedArchiveBytes.
func inflateArchive(ctx context.Context, hist *dir, name, work string, pace *pacer) error {
	src, _, err := hist.openFile(name)
	if err != nil {
		return fmt.Errorf("decompress %s: %w", name, err)
	}
	defer src.Close()
	out, err := os.OpenFile(work, os.O_CREATE|os.O_EXCL|os.O_WRONLY, fileMode)
	if err != nil {
		return fmt.Errorf("decompress to %s: %w", filepath.Base(work), err)
	}
	_, err = inflateTo(ctx, out, &pacedReader{r: src, p: pace, ctx: ctx}, MaxInflatedArchiveBytes)
	err = closeFile(out, err, false)
	if err != nil {
		return fmt.Errorf("decompress %s: %w", name, err)
	}
	return nil
}

// cleanHistoryTemps removes hidden temp files an interrupted seal or archive
// left, and .meta.json and .idx files whose database is gone, once they
// are two leases old.
func (r *Recorder) cleanHistoryTemps(hist *dir) {
	names, _ := hist.names()
	present := map[string]bool{}
	for _, name := range names {
		present[name] = true
	}
	for _, name := range names {
		temp := strings.HasPrefix(name, ".") && (strings.HasSuffix(name, ".tmp") || strings.HasSuffix(name, ".stale"))
		orphan := false
		for _, s := range []string{".meta.json", ".idx"} {
			if base, ok := strings.CutSuffix(name, s); ok && !strings.HasPrefix(name, ".") &&
				(strings.HasSuffix(base, ".db") || strings.HasSuffix(base, ".db.gz")) && !present[base] {
				orphan = true
			}
		}
		if !temp && !orphan {
			continue
		}
		if fi, err := hist.stat(name); err == nil && r.cfg.Now().Sub(fi.ModTime()) > 2*archiveLease {
			hist.remove(name)
		}
	}
}

// removeExpiredMerged deletes merge results older than MergedRetentionDays,
// dated by the <ts> in their name (else the file's mtime).
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
