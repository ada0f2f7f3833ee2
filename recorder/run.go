package recorder

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"
)

// maxBatch bounds how many queued items one transaction writes.
const maxBatch = 1024

// Run owns the live file: it writes queued events and task rows in batches
// (one transaction per batch), seals every SealInterval, rewrites the
// watchdog file and, when enabled, archives and applies merge retention
// (memory-only mode: only the archiving).
// When ctx ends it writes what is queued, seals the live file, removes the
// watchdog file (a clean shutdown) and returns. Run may be called once.
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
	// A memory-only worker seals nothing but still takes its turn at
	// archiving the shared folder.
	if r.cfg.ArchiveEnabled && r.sharedRoot != "" {
		wg.Go(func() { r.archiveLoop(ctx) })
	}
	wg.Go(func() { r.housekeepLoop(ctx) })
	if r.memory {
		<-ctx.Done()
	} else {
		r.writeWatchdog()
		wg.Go(func() { r.watchdogLoop(ctx) })
		r.writeLoop(ctx)
	}
	wg.Wait()
	return r.shutdown(context.Background())
}

// cachePruneInterval is how often cached archive copies are checked
// against the shared folder.
const cachePruneInterval = time.Minute

// housekeepLoop drops cached archive copies whose archive is gone or
// changed, so they do not outlive it on disk, and measures the shared
// folder (see History).
func (r *Recorder) housekeepLoop(ctx context.Context) {
	t := time.NewTicker(cachePruneInterval)
	defer t.Stop()
	r.measure()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			r.pruneCache(ctx)
			r.measure()
		}
	}
}

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
	size := time.NewTicker(liveSizeCheck)
	defer size.Stop()
	// Writes use a background context: a batch taken off the queue is
	// written even while shutting down.
	bg := context.Background()
	batch := make([]item, 0, maxBatch)
	for {
		select {
		case <-ctx.Done():
			return
		case it := <-r.in:
			// Linger briefly so one transaction carries many rows: at a few
			// thousand rows a second, a transaction per row costs far more
			// CPU than the rows themselves.
			batch = r.fillBatch(append(batch[:0], it))
			if len(batch) < maxBatch {
				linger := time.NewTimer(writeLinger)
			gather:
				for len(batch) < maxBatch {
					select {
					case it := <-r.in:
						batch = append(batch, it)
					case <-linger.C:
						break gather
					case <-ctx.Done():
						break gather
					}
				}
				linger.Stop()
			}
			r.writeBatch(bg, batch)
		case <-seal.C:
			r.sealLive(bg, false)
		case <-size.C:
			if r.liveOverSize() {
				r.sealLive(bg, false)
				seal.Reset(r.cfg.SealInterval)
			}
		case reply := <-r.sealReq:
			r.drain(bg)
			reply <- r.sealLive(bg, false)
		}
	}
}

// liveRetryInterval is how often the writer retries creating a live file
// that could not be created.
const liveRetryInterval = 5 * time.Second

// writeLinger is how long the writer waits for more rows after the first
// one of a batch.
const writeLinger = 20 * time.Millisecond

// fillBatch appends queued items without waiting, up to maxBatch.
func (r *Recorder) fillBatch(batch []item) []item {
	for len(batch) < maxBatch {
		select {
		case it := <-r.in:
			batch = append(batch, it)
		default:
			return batch
		}
	}
	return batch
}

// drain writes everything queued right now.
func (r *Recorder) drain(ctx context.Context) {
	batch := make([]item, 0, maxBatch)
	for {
		batch = r.fillBatch(batch[:0])
		if len(batch) == 0 {
			return
		}
		r.writeBatch(ctx, batch)
	}
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

// writeBatch stores items in one transaction. A failed batch is lost: its
// rows are counted as dropped and lost, and the writer carries on with the
// next one.
func (r *Recorder) writeBatch(ctx context.Context, items []item) error {
	err := r.insertItems(ctx, items)
	if err != nil {
		r.recordLoss(items, err)
		return err
	}
	r.writeSucceeded()
	for _, it := range items {
		if it.ev != nil {
			r.stats.eventsWritten.Add(1)
		} else {
			r.stats.tasksWritten.Add(1)
			r.counts.add(it.task.Source, it.task.Status)
		}
	}
	return nil
}

func (r *Recorder) insertItems(ctx context.Context, items []item) error {
	// Only the writer replaces r.live, so it reads the field without liveMu.
	lf := r.live
	if lf == nil {
		// A new live file could not be created after a seal (full disk, say):
		// try again now and then rather than waiting for the next seal.
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
	tx, err := lf.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin batch: %w", err)
	}
	w := &txWriter{ctx: ctx, tx: tx, stmts: map[string]*sql.Stmt{}}
	for _, it := range items {
		if it.ev != nil {
			err = insertEvent(w, it.ev)
		} else {
			err = insertTask(w, it.task)
		}
		if err != nil {
			tx.Rollback()
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit batch: %w", err)
	}
	return nil
}

// txWriter prepares each distinct statement once per transaction.
type txWriter struct {
	ctx   context.Context
	tx    *sql.Tx
	stmts map[string]*sql.Stmt
}

func (w *txWriter) exec(query string, args ...any) error {
	st, ok := w.stmts[query]
	if !ok {
		var err error
		if st, err = w.tx.PrepareContext(w.ctx, query); err != nil {
			return err
		}
		w.stmts[query] = st
	}
	_, err := st.ExecContext(w.ctx, args...)
	return err
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
