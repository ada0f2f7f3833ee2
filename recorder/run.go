package recorder

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"zombiezen.com/go/sqlite"
)

// maxBatch bounds how many queued items one transaction writes (below it
// the linger ends a batch); at 1,024, commits and odd-sized INSERT tails
// came three times as often and cost the writer about 20 % more CPU.
const maxBatch = 4096

// Run owns the live file: it writes queued events and task rows in batches,
// seals every SealInterval, rewrites the watchdog file and, when enabled,
// archives (memory-only mode: only the archiving). When ctx ends it writes
// what is queued, seals, removes the watchdog file and returns. Run may be
// called once.
func (r *Recorder) Run(ctx context.Context) error {
	if !r.running.CompareAndSwap(false, true) {
		return errors.New("run recorder: already running")
	}
	r.inMu.Lock()
	stopped := r.stopped
	r.inMu.Unlock()
	if stopped {
		return errors.New("run recorder: closed")
	}
	var wg sync.WaitGroup
	// A memory-only worker still takes its turn at archiving, every
	// quarter window or half ArchiveAfter, whichever is shorter (1s-15m).
	if r.cfg.ArchiveEnabled && r.sharedRoot != "" {
		pass := min(max(min(r.cfg.ArchiveWindow/4, r.cfg.ArchiveAfter/2), time.Second), 15*time.Minute)
		wg.Go(func() {
			every(ctx, pass, func() {
				if err := r.archivePass(ctx); err != nil && ctx.Err() == nil {
					r.stats.archiveErrors.Add(1)
					r.log.Error("recorder_archive_failed", "error", err)
				}
			})
		})
	}
	// Housekeeping: the archive cache is pruned and the shared folder
	// measured (see History).
	wg.Go(func() {
		r.measure()
		every(ctx, cachePruneInterval, func() {
			r.pruneCache(ctx)
			r.measure()
		})
	})
	if r.memory {
		<-ctx.Done()
	} else {
		r.writeWatchdog()
		wg.Go(func() { every(ctx, r.cfg.WatchdogInterval, r.writeWatchdog) })
		r.writeLoop(ctx)
	}
	wg.Wait()
	return r.shutdown(context.Background())
}

// every runs fn every d until ctx ends.
func every(ctx context.Context, d time.Duration, fn func()) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			fn()
		}
	}
}

// cachePruneInterval is how often cached archive copies are checked.
const cachePruneInterval = time.Minute

// pruneCache drops cached archive copies whose archive is gone or changed.
func (r *Recorder) pruneCache(ctx context.Context) {
	if n, _ := r.gz.cached(); n == 0 {
		return
	}
	if files, err := r.listShared(ctx, false, false); err == nil {
		r.gz.prune(files)
	}
}

// writeLoop is the single writer of the live file until ctx ends.
func (r *Recorder) writeLoop(ctx context.Context) {
	seal := time.NewTicker(r.cfg.SealInterval)
	defer seal.Stop()
	r.sealTick = seal
	hold := time.NewTicker(summaryHold / 2)
	defer hold.Stop()
	// A batch taken off the queue is written even while shutting down.
	bg := context.Background()
	batch := make([]item, 0, maxBatch)
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.wake:
			// Linger so one transaction carries many rows. (A wake-up may
			// find the queue already taken by the batch before.)
			if batch = r.fillBatch(batch[:0]); len(batch) > 0 {
				r.writeItems(bg, r.linger(ctx, batch))
			}
			r.writeOverflow(bg)
		case <-hold.C:
			r.writeOverflow(bg)
			if r.sum.waiting() > 0 {
				r.writeItems(bg, nil)
			}
		case <-seal.C:
			if rest := r.sum.flush(time.Now()); len(rest) > 0 {
				r.writeBatch(bg, rest)
			}
			r.sealLive(bg, false)
		case reply := <-r.sealReq:
			r.drain(bg)
			reply <- r.sealLive(bg, false)
		}
	}
}

// sealIfOverSize seals the live file when it outgrew LiveMaxBytes (see
// liveOverSize) and restarts the seal interval. It runs after every write
// transaction, so the file outgrows its bound by one transaction at most.
func (r *Recorder) sealIfOverSize(ctx context.Context) {
	if r.liveOverSize() {
		r.sealLive(ctx, false)
		if r.sealTick != nil {
			r.sealTick.Reset(r.cfg.SealInterval)
		}
	}
}

// liveRetryInterval is how often the writer retries creating a live file.
const liveRetryInterval = 5 * time.Second

// writeLinger is how long the writer waits for more rows after the first
// one of a batch; lingerStep is how often it looks at the queue meanwhile.
const writeLinger = 20 * time.Millisecond

const lingerStep = 2 * time.Millisecond

// linger waits up to writeLinger for the queue to hold a whole batch, then
// takes what it holds (up to maxBatch). It polls the queue's length every
// lingerStep: receiving each item woke the writer per row and handed it
// over under inMu, the worker's most contended lock.
func (r *Recorder) linger(ctx context.Context, batch []item) []item {
	deadline := time.Now().Add(writeLinger)
	for len(batch)+int(r.queued.Load()) < maxBatch {
		left := time.Until(deadline)
		if left <= 0 {
			break
		}
		if r.lingerT == nil {
			r.lingerT = time.NewTimer(min(left, lingerStep))
		} else {
			r.lingerT.Reset(min(left, lingerStep))
		}
		select {
		case <-r.lingerT.C:
		case <-ctx.Done():
			return r.fillBatch(batch)
		}
	}
	return r.fillBatch(batch)
}

// fillBatch appends queued items without waiting, up to maxBatch. Items
// left in the queue wake the writer again.
func (r *Recorder) fillBatch(batch []item) []item {
	if r.queued.Load() == 0 || len(batch) >= maxBatch {
		return batch
	}
	r.inMu.Lock()
	defer r.inMu.Unlock()
	n := min(len(r.queue), maxBatch-len(batch))
	batch = append(batch, r.queue[:n]...)
	left := copy(r.queue, r.queue[n:])
	clear(r.queue[left:]) // keep no written item alive
	r.queue = r.queue[:left]
	r.queued.Store(int64(left))
	if left > 0 {
		r.wakeWriter()
	}
	return batch
}

func (r *Recorder) wakeWriter() {
	select {
	case r.wake <- struct{}{}:
	default: // a wake-up is pending already
	}
}

// drain writes everything queued, and every lifecycle event still waiting
// for its task row, so a seal leaves nothing behind.
func (r *Recorder) drain(ctx context.Context) {
	batch := make([]item, 0, maxBatch)
	for {
		batch = r.fillBatch(batch[:0])
		if len(batch) == 0 {
			break
		}
		r.writeItems(ctx, batch)
	}
	r.writeOverflow(ctx)
	if rest := r.sum.flush(time.Now()); len(rest) > 0 {
		r.writeBatch(ctx, rest)
	}
}

// writeItems passes a batch through the summarizer and writes the result.
func (r *Recorder) writeItems(ctx context.Context, batch []item) {
	items := r.sum.filter(batch, time.Now())
	if len(items) > 0 {
		r.writeBatch(ctx, items)
	}
	r.sum.recycle(items)
}

// sealNow asks the running writer to seal the live file and waits.
func (r *Recorder) sealNow(ctx context.Context) error {
	reply := make(chan error, 1)
	select {
	case r.sealReq <- reply:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-reply:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// writeBatch stores items in transactions of at most liveTxBytes each,
// sealing for size after each (a backlog's batch must not carry the live
// file megabytes past LiveMaxBytes). A failed transaction's rows are
// counted as dropped and lost; the writer carries on.
func (r *Recorder) writeBatch(ctx context.Context, items []item) error {
	var errs []error
	limit := r.liveTxBytes()
	for len(items) > 0 {
		n, size := 0, 0
		for n < len(items) && (n == 0 || size < limit) {
			size += itemBytes(&items[n])
			n++
		}
		errs = append(errs, r.writeTx(ctx, items[:n]))
		items = items[n:]
		r.sealIfOverSize(ctx)
	}
	return errors.Join(errs...)
}

// liveTxBytes bounds the rows one transaction writes: a quarter of
// LiveMaxBytes (at least 64 KiB), so the live file stays within about 1.5 ×
// LiveMaxBytes between checks. Smaller shares cost measurably more CPU; at
// the default 128 MiB no batch is ever split.
func (r *Recorder) liveTxBytes() int {
	return int(max(r.cfg.LiveMaxBytes/4, 64<<10))
}

// itemBytes estimates what an item takes in the live file, cheaply (it
// runs for every item, so it walks no map).
func itemBytes(it *item) int {
	const row, label = 128, 40 // ids, times, small columns and index entries; a label or env entry
	switch {
	case it.ev != nil:
		return row + len(it.ev.Type) + len(it.ev.Kind) + len(it.ev.TaskID) + len(it.ev.Payload) + label*len(it.ev.Labels)
	case it.sampled || it.task == nil:
		return 0
	}
	t := it.task
	n := 2*row + len(t.TaskID) + len(t.Key) + len(t.Error) + 2*label*len(t.Labels) + label*len(t.Env) // labels: the column and task_labels
	if it.sum == nil {
		return n
	}
	for _, x := range it.sum.Extras {
		n += 32 + len(x.Type) + len(x.Kind) + len(x.Payload)
	}
	return n
}

// writeTx stores items in one transaction and counts them.
func (r *Recorder) writeTx(ctx context.Context, items []item) error {
	err := r.insertItems(ctx, items)
	if err != nil {
		r.recordLoss(items, err)
		return err
	}
	r.writeSucceeded()
	for _, it := range items {
		if it.ev != nil {
			r.stats.eventsWritten.Add(1)
		} else if it.sampled {
			r.stats.tasksSampled.Add(1)
		} else {
			r.stats.tasksWritten.Add(1)
			if it.folded > 0 {
				r.stats.eventsWritten.Add(uint64(it.folded))
				r.stats.eventsSummarized.Add(uint64(it.folded))
			}
		}
	}
	return nil
}

func (r *Recorder) insertItems(ctx context.Context, items []item) error {
	// Only the writer replaces r.live, so it reads the field without liveMu.
	lf := r.live
	if lf == nil {
		// No live file since a failed seal (full disk, say): retry now and then.
		if now := r.cfg.Now(); !r.memory && now.Sub(r.liveRetryAt) >= liveRetryInterval {
			r.liveRetryAt = now
			if err := r.openLive(ctx, now.UnixMilli()); err != nil {
				return fmt.Errorf("write batch: no live file: %w", err)
			}
			lf = r.live
		}
		if lf == nil {
			return errors.New("write batch: no live file")
		}
	}
	conn, err := lf.writeConn()
	if err != nil {
		return fmt.Errorf("begin batch: %w", err)
	}
	w := lf.batch(conn)
	if err := w.exec(`BEGIN`); err != nil {
		lf.dropConn()
		return fmt.Errorf("begin batch: %w", err)
	}
	// After a failed batch the next one starts on a fresh connection.
	rollback := func() { w.exec(`ROLLBACK`); lf.dropConn() }
	for _, it := range items {
		switch {
		case it.ev != nil:
			err = insertEvent(w, it.ev)
		case it.sampled:
			continue
		default:
			err = insertTask(w, it.task, it.sum)
		}
		if err != nil {
			rollback()
			return err
		}
	}
	if err := w.flush(); err != nil {
		rollback()
		return err
	}
	if err := w.exec(`COMMIT`); err != nil {
		rollback()
		return fmt.Errorf("commit batch: %w", err)
	}
	return nil
}

// batchWriter runs the writer's statements on its own connection to the
// live file (liveFile.writeConn, SQLITE_OPEN_NOMUTEX), each prepared once
// and kept by the connection, binding typed values (database/sql's boxing
// cost about 50 % more a row). It inserts events, task rows and task
// labels insertChunk rows per statement (a statement per row cost more in
// binding than SQLite spent storing it). A live file keeps one, reusing
// its argument slices.
type batchWriter struct {
	conn                  *sqlite.Conn
	events, tasks, labels multiInsert
}

// batch returns the file's batch writer for a batch on conn.
func (lf *liveFile) batch(conn *sqlite.Conn) *batchWriter {
	if lf.bw == nil {
		w := &batchWriter{}
		w.events = multiInsert{w: w, what: "event", ncols: 8,
			prefix: `INSERT INTO events(id, ts_ms, type, kind, task_id, worker, labels, payload) VALUES `}
		w.tasks = multiInsert{w: w, what: "task", ncols: 27,
			prefix: `INSERT INTO tasks(` + rowColumns + `) VALUES `}
		w.labels = multiInsert{w: w, what: "task label", ncols: 4,
			prefix: `INSERT INTO task_labels(name, value, task_id, ts_ms) VALUES `}
		lf.bw = w
	}
	lf.bw.conn = conn
	for _, m := range []*multiInsert{&lf.bw.events, &lf.bw.tasks, &lf.bw.labels} {
		clear(m.args)
		m.args, m.rows = m.args[:0], 0
	}
	return lf.bw
}

func (w *batchWriter) flush() error {
	return errors.Join(w.events.flush(), w.tasks.flush(), w.labels.flush())
}

// insertChunk is how many rows one multi-row INSERT carries (27 × 64
// parameters stays far below SQLite's 32766).
const insertChunk = 64

// multiInsert collects rows of one table, in order, and inserts them
// insertChunk at a time.
type multiInsert struct {
	w      *batchWriter
	what   string
	prefix string // INSERT INTO t(cols) VALUES
	ncols  int
	args   []arg
	rows   int
}

func (m *multiInsert) add(vals ...arg) error {
	m.args = append(m.args, vals...)
	m.rows++
	if m.rows == insertChunk {
		return m.flush()
	}
	return nil
}

// flush inserts the collected rows: a full chunk at once, fewer in pieces
// of a power of two (32, 16, ..., 1). Each row count is a statement SQLite
// keeps prepared outside the Go heap on every connection: with every count
// from 1 to 64 memory crept up with the number of tasks; powers of two
// make 7 counts a table.
func (m *multiInsert) flush() error {
	if m.rows == 0 {
		return nil
	}
	var err error
	if m.rows == insertChunk {
		err = m.w.exec(valuesSQL(m.prefix, m.ncols, m.rows), m.args...)
	} else {
		args, rows := m.args, m.rows
		for size := insertChunk / 2; size >= 1 && err == nil; size /= 2 {
			if rows >= size {
				err = m.w.exec(valuesSQL(m.prefix, m.ncols, size), args[:size*m.ncols]...)
				args, rows = args[size*m.ncols:], rows-size
			}
		}
	}
	clear(m.args)
	m.args, m.rows = m.args[:0], 0
	if err != nil {
		return fmt.Errorf("insert %s: %w", m.what, err)
	}
	return nil
}

// valuesSQLs caches multi-row INSERT texts by prefix and row count.
var valuesSQLs sync.Map

// valuesSQL is prefix followed by rows groups of ncols placeholders.
func valuesSQL(prefix string, ncols, rows int) string {
	key := prefix + strconv.Itoa(rows)
	if q, ok := valuesSQLs.Load(key); ok {
		return q.(string)
	}
	group := "(" + strings.Repeat("?, ", ncols-1) + "?)"
	q := prefix + group + strings.Repeat(", "+group, rows-1)
	valuesSQLs.Store(key, q)
	return q
}

// arg is one argument of the writer's statements, unboxed: text or integer.
type arg struct {
	s    string
	i    int64
	text bool
}

func str(s string) arg { return arg{s: s, text: true} }
func num(i int64) arg  { return arg{i: i} }

// exec runs query with args on the writer's connection. The statement stays
// prepared; its bindings are cleared at once so a kept 64-row statement
// holds no payloads.
func (w *batchWriter) exec(query string, args ...arg) error {
	st, err := w.conn.Prepare(query)
	if err != nil {
		return err
	}
	for i := range args {
		if a := &args[i]; a.text {
			st.BindText(i+1, a.s)
		} else {
			st.BindInt64(i+1, a.i)
		}
	}
	_, err = st.Step() // resets the statement when it fails
	if err == nil {
		err = st.Reset()
	}
	return errors.Join(err, st.ClearBindings())
}

// shutdown stops intake, writes what is queued, seals the live file and
// removes the watchdog file. It runs once; later calls return its result.
func (r *Recorder) shutdown(ctx context.Context) error {
	r.shutdownOnce.Do(func() {
		r.inMu.Lock()
		r.stopped = true
		r.inMu.Unlock()
		if r.memory {
			return
		}
		r.drain(ctx)
		err := r.sealLive(ctx, true)
		r.closeLive()
		if werr := removeIfExists(r.watchdogPath()); werr != nil && err == nil {
			err = fmt.Errorf("remove watchdog: %w", werr)
		}
		r.shutdownErr = err
	})
	return r.shutdownErr
}
