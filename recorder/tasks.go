package recorder

import (
	"context"
	"fmt"
	"maps"
	"sync"

	"zombiezen.com/go/sqlite"

	"svc/worker/event"
)

// Task records t without blocking; a full write queue drops and counts it.
// Live subscribers receive the masked row either way.
func (r *Recorder) Task(t event.TaskRow) {
	if t.TSms == 0 {
		t.TSms = r.cfg.Now().UnixMilli()
	}
	if t.Worker == "" {
		t.Worker = r.cfg.Worker
	}
	t.Labels = cloneLabels(t.Labels)
	t.Env = r.maskEnv(t.Env)
	// Counted as it finishes, whatever becomes of its row: the counts stay
	// exact when a row is sampled, dropped or lost (LostRows says so).
	r.counts.add(t.Source, t.Status)
	if r.memory {
		r.ring.addTask(t)
		r.stats.tasksWritten.Add(1)
	} else if !r.enqueue(item{task: &t}) {
		r.stats.tasksDropped.Add(1)
		r.counts.lose(1)
	}
	r.subs.publishTask(t)
}

// TaskResults returns recent task rows, newest first (limit 1-1000, default
// 200), from the same data Events reads.
func (r *Recorder) TaskResults(ctx context.Context, limit int) ([]event.TaskRow, error) {
	limit = clampLimit(limit, 200, 1000)
	if r.memory {
		return r.ring.tasksWhere(nil, limit), nil
	}
	query := `SELECT ` + taskColumns + ` FROM tasks ORDER BY id DESC LIMIT ?`
	var out []event.TaskRow
	err := r.withLive(ctx, func(db *sqlite.Conn) error {
		var err error
		out, err = r.queryTasks(db, query, limit)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("query task results: %w", err)
	}
	for _, segs := range r.recentSealed() {
		if len(out) >= limit {
			break
		}
		more, err := queryShared(ctx, r, segs, func(db *sqlite.Conn) ([]event.TaskRow, error) {
			return r.queryTasks(db, query, limit-len(out))
		})
		if err != nil {
			continue
		}
		out = append(out, more...)
	}
	return out, nil
}

// taskColumns lists the tasks columns in TaskRow order, for scanTask.
const taskColumns = `task_id, ts_ms, worker, source, alias, partition, "offset", key, labels, status, attempts, duration_ms, error, output_size_bytes, env, key_encoding`

// queryTasks runs a query selecting taskColumns.
func (r *Recorder) queryTasks(db *sqlite.Conn, q string, args ...any) ([]event.TaskRow, error) {
	var out []event.TaskRow
	err := query(db, q, func(st *sqlite.Stmt) error {
		out = append(out, r.scanTaskRow(st))
		return nil
	}, args...)
	return out, err
}

// scanTaskRow reads the taskColumns of a row.
func (r *Recorder) scanTaskRow(st *sqlite.Stmt) event.TaskRow {
	t := event.TaskRow{TaskID: st.ColumnText(0), TSms: st.ColumnInt64(1), Worker: st.ColumnText(2), Source: st.ColumnText(3),
		Alias: st.ColumnText(4), Partition: st.ColumnInt32(5), Offset: st.ColumnInt64(6), Key: st.ColumnText(7),
		Labels: decodeLabels(st.ColumnText(8)), Status: st.ColumnText(9), Attempts: st.ColumnInt(10),
		DurationMs: st.ColumnInt64(11), Error: st.ColumnText(12), OutputSizeBytes: st.ColumnInt64(13), KeyEncoding: st.ColumnText(15)}
	if m := decodeLabels(st.ColumnText(14)); len(m) > 0 {
		t.Env = r.maskEnv(m)
	}
	return t
}

// scanSummary reads the summaryColumns and extraColumns of a rowColumns row.
func scanSummary(st *sqlite.Stmt) Summary {
	return Summary{Lifecycle: event.Lifecycle{ReceivedID: st.ColumnInt64(16), StartedDID: st.ColumnInt64(17), FinishedDID: st.ColumnInt64(18),
		ReceivedMs: st.ColumnInt64(19), StartedDMs: st.ColumnInt64(20), FinishedDMs: st.ColumnInt64(21),
		InputSizeBytes: st.ColumnInt64(22), AttemptDuration: st.ColumnInt64(23)}, Extras: decodeExtras(st.ColumnText(24))}
}

// insertTask writes t, with its summary s when set, and one task_labels
// row per label.
func insertTask(w *batchWriter, t *event.TaskRow, s *Summary) error {
	env := "{}" // most workers set no executor.env: no encoding, no allocation
	if len(t.Env) > 0 {
		env = encodeStringMap(t.Env)
	}
	if s == nil {
		s = &Summary{}
	}
	if err := w.tasks.add(str(t.TaskID), num(t.TSms), str(t.Worker), str(t.Source), str(t.Alias), num(int64(t.Partition)), num(t.Offset),
		str(t.Key), str(encodeLabels(t.Labels)), str(t.Status), num(int64(t.Attempts)), num(t.DurationMs), str(t.Error), num(t.OutputSizeBytes), str(env),
		str(t.KeyEncoding), num(s.ReceivedID), num(s.StartedDID), num(s.FinishedDID), num(s.ReceivedMs), num(s.StartedDMs), num(s.FinishedDMs), num(s.InputSizeBytes), num(s.AttemptDuration),
		str(encodeExtras(s.Extras)), num(s.topID(event.TypeAnnotation)), num(s.topID(event.TypeSinkDelivered))); err != nil {
		return err
	}
	for name, value := range t.Labels {
		if err := w.labels.add(str(name), str(value), str(t.TaskID), num(t.TSms)); err != nil {
			return err
		}
	}
	return nil
}

// Counts are the dashboard request counts: tasks finished since this
// recorder opened (SinceMs), by source and status, counted as their rows
// are handed over, so they stay exact whatever becomes of the rows (those
// that never reached the history are in LostRows).
type Counts struct {
	SinceMs    int64                       `json:"since_ms"`
	Total      int64                       `json:"total"`
	BySource   map[string]map[string]int64 `json:"by_source"`  // source → status → count
	Incomplete bool                        `json:"incomplete"` // some task rows never reached the history
	LostRows   int64                       `json:"lost_rows"`  // task rows missing from the history (still counted)
}

// Counts returns the dashboard request counts.
func (r *Recorder) Counts(ctx context.Context) (Counts, error) {
	return r.counts.snapshot(), ctx.Err()
}

type counter struct {
	mu      sync.Mutex
	sinceMs int64
	total   int64
	lost    int64
	by      map[string]map[string]int64
}

// lose counts task rows that will never be in the history.
func (c *counter) lose(n int64) {
	if n == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lost += n
}

func (c *counter) add(source, status string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.by == nil {
		c.by = map[string]map[string]int64{}
	}
	if c.by[source] == nil {
		c.by[source] = map[string]int64{}
	}
	c.by[source][status]++
	c.total++
}

func (c *counter) snapshot() Counts {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := Counts{SinceMs: c.sinceMs, Total: c.total, BySource: map[string]map[string]int64{},
		Incomplete: c.lost > 0, LostRows: c.lost}
	for src, m := range c.by {
		out.BySource[src] = maps.Clone(m)
	}
	return out
}

// maskEnv applies Config.MaskEnv: the same redaction as config views, on
// rows written here and on rows read from any file.
func (r *Recorder) maskEnv(env map[string]string) map[string]string {
	if env == nil || r.cfg.MaskEnv == nil {
		return env
	}
	return r.cfg.MaskEnv(env)
}
