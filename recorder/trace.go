package recorder

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"

	"zombiezen.com/go/sqlite"

	"svc/worker/event"
)

// maxTraceEvents caps one Trace answer.
const maxTraceEvents = 10000

// Trace returns every event of taskID, oldest first, from the live file (or
// the memory ring), this cluster's sealed files and its archives (skipping
// those whose .idx rules taskID out; see gzCache for how archives are read
// and refused). An event seen in two files is returned once; files removed
// meanwhile are skipped. It stops when ctx ends.
func (r *Recorder) Trace(ctx context.Context, taskID string) ([]event.Event, error) {
	return r.TraceIn(ctx, taskID, ScopeCluster)
}

// Scope says which files a trace reads.
type Scope int

const (
	// ScopeCluster reads the live file (or memory ring), sealed files and archives.
	ScopeCluster Scope = iota
	// ScopeLocal reads this worker's live file (or memory ring) only.
	ScopeLocal
)

// TraceIn is Trace over the files of scope.
func (r *Recorder) TraceIn(ctx context.Context, taskID string, scope Scope) ([]event.Event, error) {
	if taskID == "" {
		return nil, nil
	}
	const query = `SELECT id, ts_ms, type, kind, task_id, worker, labels, payload FROM events WHERE task_id = ? ORDER BY id LIMIT ?`
	var all []event.Event
	if r.memory {
		all = r.ring.taskEvents(taskID)
	}
	// taskEvents reads taskID's event rows and rebuilds its summarized ones.
	taskEvents := func(db *sqlite.Conn) ([]event.Event, error) {
		evs, err := queryEvents(db, query, taskID, maxTraceEvents)
		if err != nil {
			return nil, err
		}
		more, err := summarizedEvents(r, db, taskID)
		return append(evs, more...), err
	}
	err := r.withLive(ctx, func(db *sqlite.Conn) error {
		var err error
		all, err = taskEvents(db)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("trace %s: live: %w", taskID, err)
	}
	if scope == ScopeLocal {
		return MergeEvents(all), nil
	}
	files, err := r.listShared(ctx, false, false)
	if err != nil {
		return nil, fmt.Errorf("trace %s: %w", taskID, err)
	}
	r.gz.prune(files)
	hist := r.openHist()
	defer hist.close()
	for _, f := range files {
		if !hist.mayHold(f, taskKey(taskID)) {
			continue
		}
		evs, err := queryHist(ctx, r, f, taskEvents)
		if err != nil {
			// One unreadable file must not hide the rest of the history.
			r.log.Warn("recorder_trace_file_failed", "file", f.rel, "error", err)
			continue
		}
		all = append(all, evs...)
	}
	return MergeEvents(all), nil
}

// MergeEvents joins lists of one task's events (from files, or peers'
// live files) into one trace: an event found twice appears once,
// identified by (worker, ts_ms, type, kind, compacted payload); oldest
// first (then by worker and id), at most maxTraceEvents.
func MergeEvents(lists ...[]event.Event) []event.Event {
	var all []event.Event
	for _, l := range lists {
		all = append(all, l...)
	}
	seen := map[string]bool{}
	var buf bytes.Buffer
	all = slices.DeleteFunc(all, func(e event.Event) bool {
		buf.Reset()
		payload := string(e.Payload)
		if json.Compact(&buf, e.Payload) == nil {
			payload = buf.String()
		}
		k := e.Worker + "\x00" + strconv.FormatInt(e.TSms, 10) + "\x00" + e.Type + "\x00" + e.Kind + "\x00" + payload
		dup := seen[k]
		seen[k] = true
		return dup
	})
	slices.SortStableFunc(all, func(a, b event.Event) int {
		return cmp.Or(cmp.Compare(a.TSms, b.TSms), strings.Compare(a.Worker, b.Worker), cmp.Compare(a.ID, b.ID))
	})
	if len(all) > maxTraceEvents {
		all = all[:maxTraceEvents]
	}
	return all
}

// TraceByLabel returns task rows carrying label name=value, newest first
// (limit 1-1000, default 100), from the same files as Trace. Files are read
// newest first, and no further once limit rows newer than the next file's
// to_ms are found.
func (r *Recorder) TraceByLabel(ctx context.Context, name, value string, limit int) ([]event.TaskRow, error) {
	return r.TraceByLabelIn(ctx, name, &value, limit, ScopeCluster)
}

// TraceByLabelName is TraceByLabel matching any value of label name.
func (r *Recorder) TraceByLabelName(ctx context.Context, name string, limit int) ([]event.TaskRow, error) {
	return r.TraceByLabelIn(ctx, name, nil, limit, ScopeCluster)
}

// TraceByLabelIn matches tasks whose label name has value, or any value
// when value is nil, in the files of scope.
func (r *Recorder) TraceByLabelIn(ctx context.Context, name string, value *string, limit int, scope Scope) ([]event.TaskRow, error) {
	limit = clampLimit(limit, 100, 1000)
	query, args := labelQuery(name, value, limit)
	queryFile := func(db *sqlite.Conn) ([]event.TaskRow, error) { return r.queryTasks(db, query, args...) }
	matches := func(t event.TaskRow) bool {
		v, ok := t.Labels[name]
		return ok && (value == nil || v == *value)
	}
	key := labelNameKey(name)
	if value != nil {
		key = labelKey(name, *value)
	}
	var all []event.TaskRow
	add := func(rows []event.TaskRow) { all = MergeTaskRows(name, value, limit, all, rows) }
	if r.memory {
		add(r.ring.tasksWhere(matches, limit))
	}
	err := r.withLive(ctx, func(db *sqlite.Conn) error {
		rows, err := r.queryTasks(db, query, args...)
		add(rows)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("trace label %s: live: %w", name, err)
	}
	if scope == ScopeLocal {
		return all, nil
	}
	files, err := r.listShared(ctx, false, true)
	if err != nil {
		return nil, fmt.Errorf("trace label %s: %w", name, err)
	}
	r.gz.prune(files)
	slices.SortStableFunc(files, func(a, b histFile) int { return cmp.Compare(newestRow(b), newestRow(a)) })
	hist := r.openHist()
	defer hist.close()
	for _, f := range files {
		if len(all) == limit && all[limit-1].TSms > newestRow(f) {
			break // this file and every later one hold older rows only
		}
		if !hist.mayHold(f, key) {
			continue
		}
		rows, err := queryHist(ctx, r, f, queryFile)
		if err != nil {
			r.log.Warn("recorder_trace_file_failed", "file", f.rel, "error", err)
			continue
		}
		add(rows)
	}
	return all, nil
}

// taskRowKey identifies a task row found in more than one file.
func taskRowKey(t event.TaskRow) string {
	return t.Worker + "\x00" + t.TaskID + "\x00" + strconv.FormatInt(t.TSms, 10) + "\x00" + t.Status + "\x00" + strconv.Itoa(t.Attempts)
}

// MergeTaskRows joins lists of task rows found by one label (from files or
// peers): rows carrying it only, each once, newest first, at most limit
// (1-1000, default 100).
func MergeTaskRows(name string, value *string, limit int, lists ...[]event.TaskRow) []event.TaskRow {
	limit = clampLimit(limit, 100, 1000)
	var all []event.TaskRow
	seen := map[string]bool{}
	for _, l := range lists {
		for _, t := range l {
			v, ok := t.Labels[name]
			if k := taskRowKey(t); !seen[k] && ok && (value == nil || v == *value) {
				seen[k] = true
				all = append(all, t)
			}
		}
	}
	slices.SortStableFunc(all, func(a, b event.TaskRow) int { return cmp.Compare(b.TSms, a.TSms) })
	if len(all) > limit {
		all = all[:limit]
	}
	return all
}

// labelQuery selects the newest limit task rows carrying label name with
// value (any when nil), straight off the (name, value, ts_ms) index.
func labelQuery(name string, value *string, limit int) (string, []any) {
	match, args := `name = ?`, []any{name}
	if value != nil {
		match, args = `name = ? AND value = ?`, append(args, *value)
	}
	return `SELECT ` + taskColumns + ` FROM tasks
		WHERE task_id IN (SELECT task_id FROM task_labels WHERE ` + match + ` ORDER BY ts_ms DESC LIMIT ?)
		ORDER BY ts_ms DESC LIMIT ?`, append(args, limit, limit)
}

// newestRow is the newest ts_ms f may hold: its to_ms, else the end of time.
func newestRow(f histFile) int64 {
	if f.meta.ToMs > 0 {
		return f.meta.ToMs
	}
	return math.MaxInt64
}

// histIndex is the history folder through which archive indexes are read;
// nil when it cannot be opened (nothing is skipped then).
type histIndex struct{ d *dir }

// openHist opens this cluster's history folder for index lookups.
func (r *Recorder) openHist() *histIndex {
	d, err := r.openShared(false, false, r.histSegs()...)
	if err != nil {
		return nil
	}
	return &histIndex{d}
}

// mayHold reports whether f may hold one of keys: only an archive's .idx
// can rule it out.
func (h *histIndex) mayHold(f histFile, keys ...[]byte) bool {
	return h == nil || f.shape != shapeArchive || mayHold(h.d, f, keys...)
}

func (h *histIndex) close() {
	if h != nil {
		h.d.close()
	}
}

// queryPath runs fn on a finished database file in a private folder,
// opened read-only by path.
func queryPath[T any](ctx context.Context, path string, fn func(*sqlite.Conn) ([]T, error)) ([]T, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, err
	}
	// immutable=1: no locking, no -wal or -shm beside the copy.
	return queryFinished(ctx, sqliteURI(path, "mode=ro&immutable=1"), path, fn)
}

// queryShared runs fn on a sealed or merged file of the shared folder,
// read by SQLite from the descriptor the symlink-refusing walk opened.
func queryShared[T any](ctx context.Context, r *Recorder, segs []string, fn func(*sqlite.Conn) ([]T, error)) ([]T, error) {
	f, _, err := r.openSharedFile(segs, false)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return queryOpen(ctx, r, f, fn)
}

// queryHist runs fn on a sealed file, or on the cached copy of an archive.
// A file that vanished meanwhile, or a refused archive, yields nothing.
func queryHist[T any](ctx context.Context, r *Recorder, f histFile, fn func(*sqlite.Conn) ([]T, error)) ([]T, error) {
	var out []T
	var err error
	if f.shape == shapeArchive {
		var tmp string
		var release func()
		tmp, release, err = r.gz.open(ctx, r, f)
		if err == nil {
			defer release()
			out, err = queryPath(ctx, tmp, fn)
			if err != nil && ctx.Err() == nil && notDatabase(err) {
				r.gz.refuse(r, f, err)
				err = errArchiveRefused
			}
		}
	} else {
		if r.bad.known(f) {
			return nil, nil // warned once already; the archive pass quarantines it
		}
		out, err = queryShared(ctx, r, f.segs, fn)
		if err != nil && ctx.Err() == nil && notDatabase(err) {
			r.bad.add(f) // the caller's warning is the only one
		}
	}
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, errArchiveRefused) {
		return nil, nil
	}
	return out, err
}

// notDatabase reports SQLite's verdict that a file is not a database or
// is corrupt (SQLITE_NOTADB, SQLITE_CORRUPT and their extended codes).
func notDatabase(err error) bool {
	code := sqlite.ErrCode(err).ToPrimary()
	return code == sqlite.ResultCorrupt || code == sqlite.ResultNotADB
}
