package recorder

import (
	"cmp"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
)

// protectSkew widens the windows retention never touches: a peer's clock
// may run a little behind ours.
const protectSkew = time.Minute

// HistoryUsage is what the recorder's files take on disk and how far back
// the cluster's history goes (the shared folder as last measured, every
// minute and after each archive pass; LiveBytes as it is now).
type HistoryUsage struct {
	// OldestMs is the from_ms of the oldest file kept; 0 when there is none.
	OldestMs int64 `json:"oldest_ms"`
	// Bytes is what MaxBytes bounds: SealedBytes + ArchiveBytes.
	Bytes    int64 `json:"bytes"`
	MaxBytes int64 `json:"max_bytes"`
	MaxAgeMs int64 `json:"max_age_ms"`
	// Retention: history is deleted by age and budget (archiving is on and
	// there is a shared folder).
	Retention bool `json:"retention"`
	// LiveBytes is this worker's live file and its write-ahead log.
	LiveBytes int64 `json:"live_bytes"`
	// SealedBytes and ArchiveBytes are history/<cluster>/'s sealed files
	// and archives with their sidecars; MergedBytes the files in merged/.
	SealedBytes  int64 `json:"sealed_bytes"`
	ArchiveBytes int64 `json:"archive_bytes"`
	MergedBytes  int64 `json:"merged_bytes"`
	// UpdatedMs is when the shared folder was last measured (0: not yet).
	UpdatedMs int64 `json:"updated_ms"`
	// SampleAbovePerSecond is history.sample_above_per_second (0: off);
	// TasksSampled counts the rows it left unstored since start.
	SampleAbovePerSecond int    `json:"sample_above_per_second"`
	TasksSampled         uint64 `json:"tasks_sampled"`
}

// usageState is the last measurement of the shared folder and the budget
// episode (see makeRoom).
type usageState struct {
	mu         sync.Mutex
	last       HistoryUsage
	overBudget bool // a budget episode is on: its WARN was logged
}

// History returns the current usage.
func (r *Recorder) History() HistoryUsage {
	r.usage.mu.Lock()
	u := r.usage.last
	r.usage.mu.Unlock()
	u.MaxBytes, u.MaxAgeMs = r.cfg.MaxBytes, r.cfg.MaxAge.Milliseconds()
	u.Retention = r.budgetOn()
	u.SampleAbovePerSecond, u.TasksSampled = r.cfg.SampleAbove, r.stats.tasksSampled.Load()
	r.liveMu.RLock()
	if lf := r.live; lf != nil {
		u.LiveBytes = fileBytes(lf.path, lf.path+"-wal")
	}
	r.liveMu.RUnlock()
	return u
}

func (r *Recorder) measure() {
	if r.sharedRoot == "" {
		return
	}
	u := HistoryUsage{}
	if d, err := r.openShared(false, false, r.histSegs()...); err == nil {
		files, _ := listIn(d, r.histSegs(), true)
		u.SealedBytes, u.ArchiveBytes = folderBytes(d)
		u.OldestMs = oldestKept(files)
		d.close()
	}
	if d, err := r.openShared(false, false, "merged"); err == nil {
		files, _ := listIn(d, []string{"merged"}, false)
		for _, f := range files {
			u.MergedBytes += f.size
		}
		d.close()
	}
	r.setUsage(u)
}

// setUsage records a measurement. It ends a budget episode once the history
// is within budget and reaches back MaxAge again (or is empty).
func (r *Recorder) setUsage(u HistoryUsage) {
	now := r.cfg.Now()
	u.Bytes = u.SealedBytes + u.ArchiveBytes
	u.UpdatedMs = now.UnixMilli()
	r.usage.mu.Lock()
	r.usage.last = u
	ended := r.usage.overBudget && u.Bytes <= r.cfg.MaxBytes && u.OldestMs <= now.Add(-r.cfg.MaxAge).UnixMilli()
	if ended {
		r.usage.overBudget = false
	}
	r.usage.mu.Unlock()
	if ended {
		r.log.Info("recorder_history_within_budget", "bytes", u.Bytes, "max_bytes", r.cfg.MaxBytes, "oldest_kept_ms", u.OldestMs)
	}
}

// oldestKept is the smallest from_ms among files whose time is known.
func oldestKept(files []histFile) int64 {
	var oldest int64
	for _, f := range files {
		if from := f.meta.FromMs; f.timed() && (oldest == 0 || from < oldest) {
			oldest = from
		}
	}
	return oldest
}

// timed reports whether f's place in time is known (name or .meta.json):
// only such files are ever deleted by retention.
func (f histFile) timed() bool {
	switch f.shape {
	case shapeSealed:
		return f.meta.FromMs > 0 && f.meta.ToMs > 0
	case shapeArchive:
		return f.meta.FromMs > 0
	}
	return false
}

// newest is the latest time f holds: its to_ms, else the file's mtime.
func (f histFile) newest() int64 {
	if f.meta.ToMs > 0 {
		return f.meta.ToMs
	}
	return max(f.meta.FromMs, f.modTime.UnixMilli())
}

// folderBytes sums the regular files of a history folder by kind: sealed
// files and archives with their sidecars (hidden files are not history).
func folderBytes(d *dir) (sealed, archive int64) {
	names, _ := d.names()
	for _, name := range names {
		if strings.HasPrefix(name, ".") {
			continue
		}
		base := strings.TrimSuffix(strings.TrimSuffix(name, ".meta.json"), ".idx")
		isArchive := strings.HasSuffix(base, ".db.gz")
		if !isArchive && !strings.HasSuffix(base, ".db") {
			continue
		}
		fi, err := d.stat(name)
		if err != nil || !safeRegular(fi) {
			continue
		}
		if isArchive {
			archive += fi.Size()
		} else {
			sealed += fi.Size()
		}
	}
	return sealed, archive
}

// histWindow is the files of one archive window, the unit age retention deletes.
type histWindow struct {
	start  int64
	files  []histFile
	bytes  int64 // with each file's .meta.json and .idx
	newest int64
}

// windows groups the timed files of a history folder by window
// (floor(from_ms / window) × window, whatever their kind), oldest first.
func (r *Recorder) windows(d *dir, files []histFile) []*histWindow {
	windowMs := r.cfg.ArchiveWindow.Milliseconds()
	byStart := map[int64]*histWindow{}
	for _, f := range files {
		if !f.timed() {
			continue
		}
		ws := f.meta.FromMs - f.meta.FromMs%windowMs
		w := byStart[ws]
		if w == nil {
			w = &histWindow{start: ws}
			byStart[ws] = w
		}
		w.files = append(w.files, f)
		w.bytes += f.size + sidecarBytes(d, f)
		w.newest = max(w.newest, f.newest())
	}
	out := slices.Collect(maps.Values(byStart))
	slices.SortFunc(out, func(a, b *histWindow) int { return cmp.Compare(a.start, b.start) })
	return out
}

// sidecarBytes is the size of f's .meta.json and .idx in d.
func sidecarBytes(d *dir, f histFile) int64 {
	var n int64
	for _, s := range sidecarsOf(f.segs[len(f.segs)-1]) {
		if fi, err := d.stat(s); err == nil && safeRegular(fi) {
			n += fi.Size()
		}
	}
	return n
}

// sidecarsOf names the .meta.json and (archives) .idx of history file base.
func sidecarsOf(base string) [2]string { return [2]string{base + ".meta.json", base + ".idx"} }

// protected reports whether retention must leave window w alone: a live
// file (at most one seal interval old) may still be sealed into it.
func (r *Recorder) protected(w *histWindow) bool {
	from := r.cfg.Now().Add(-r.cfg.SealInterval - protectSkew).UnixMilli()
	return w.start+r.cfg.ArchiveWindow.Milliseconds() > from
}

// retentionDue reports whether a pass has something to delete: a window
// past MaxAge, or a history folder over MaxBytes.
func (r *Recorder) retentionDue(d *dir, files []histFile) bool {
	if sealed, archive := folderBytes(d); sealed+archive > r.cfg.MaxBytes {
		return true
	}
	cutoff := r.cfg.Now().Add(-r.cfg.MaxAge).UnixMilli()
	for _, w := range r.windows(d, files) {
		if w.newest < cutoff && !r.protected(w) {
			return true
		}
	}
	return false
}

// expireByAge deletes the windows whose newest data is older than MaxAge
// and returns the files left.
func (r *Recorder) expireByAge(d *dir, files []histFile) []histFile {
	cutoff := r.cfg.Now().Add(-r.cfg.MaxAge).UnixMilli()
	gone := map[string]bool{}
	var n int
	var bytes int64
	for _, w := range r.windows(d, files) {
		if w.newest >= cutoff || r.protected(w) {
			continue
		}
		for _, f := range w.files {
			var mine bool
			gone[f.rel], mine = r.deleteHistFile(d, f)
			if mine {
				n++
				r.stats.deletedAge.Add(1)
			}
		}
		bytes += w.bytes
	}
	if n > 0 {
		r.log.Info("recorder_history_deleted", "reason", "age", "files", n, "bytes", bytes,
			"max_age", r.cfg.MaxAge.String())
	}
	return slices.DeleteFunc(files, func(f histFile) bool { return gone[f.rel] })
}

// budgetOn reports whether history.max_bytes is applied (see HistoryUsage.Retention).
func (r *Recorder) budgetOn() bool { return r.cfg.ArchiveEnabled && r.sharedRoot != "" }

// makeRoom deletes sealed files and archive parts of the history folder d,
// oldest first (by newest row), one at a time whatever their window, until
// the folder plus need bytes about to be written fits in MaxBytes, and
// returns the files left. files is d's listing (nil: listed here); keep
// names files not to delete (those a fold reads or rewrites). Every writer
// calls it before writing into the folder, and the lock holder after each
// pass. An episode that deletes for the budget, or cannot get below it,
// logs recorder_history_over_budget once (until setUsage ends it).
func (r *Recorder) makeRoom(d *dir, files []histFile, need int64, keep map[string]bool) []histFile {
	if !r.budgetOn() {
		return files
	}
	sealed, archive := folderBytes(d)
	total := sealed + archive
	before := total
	if total+need <= r.cfg.MaxBytes {
		return files
	}
	if files == nil {
		files, _ = listIn(d, r.histSegs(), true)
	}
	order := slices.Clone(files)
	slices.SortFunc(order, func(a, b histFile) int {
		return cmp.Or(cmp.Compare(a.newest(), b.newest()), cmp.Compare(a.meta.FromMs, b.meta.FromMs), strings.Compare(a.rel, b.rel))
	})
	gone := map[string]bool{}
	var n int
	for _, f := range order {
		if total+need <= r.cfg.MaxBytes {
			break
		}
		if keep[f.segs[len(f.segs)-1]] {
			continue
		}
		size := f.size + sidecarBytes(d, f)
		// Another worker may have deleted it first: gone, not counted twice.
		if ok, mine := r.deleteHistFile(d, f); ok {
			gone[f.rel] = true
			total -= size
			if mine {
				n++
				r.stats.deletedBudget.Add(1)
			}
		}
	}
	files = slices.DeleteFunc(files, func(f histFile) bool { return gone[f.rel] })
	if n > 0 {
		r.log.Info("recorder_history_deleted", "reason", "budget", "files", n, "bytes", before-total,
			"max_bytes", r.cfg.MaxBytes)
	}
	r.usage.mu.Lock()
	first := !r.usage.overBudget
	r.usage.overBudget = true
	r.usage.mu.Unlock()
	if first {
		r.log.Warn("recorder_history_over_budget", "bytes", before+need, "max_bytes", r.cfg.MaxBytes,
			"deleted_files", n, "bytes_left", total, "oldest_kept_ms", oldestKept(files), "max_age", r.cfg.MaxAge.String(),
			"detail", "history.max_bytes deletes history younger than history.max_age; raise the budget or shrink what the recorder writes")
	}
	return files
}

// deleteHistFile removes a sealed file or archive, then its sidecars,
// through d. gone: the file itself is gone; mine: this call removed it.
func (r *Recorder) deleteHistFile(d *dir, f histFile) (gone, mine bool) {
	base := f.segs[len(f.segs)-1]
	mine, err := d.unlink(base)
	if err != nil {
		r.warnEvery("recorder_history_delete_failed", d.rel, "file", f.rel, "error", err)
		return false, false
	}
	for _, s := range sidecarsOf(base) {
		d.remove(s)
	}
	return true, mine
}
