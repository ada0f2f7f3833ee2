package recorder

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"
)

// liveFile is the open live database.
type liveFile struct {
	pool   *sqlitex.Pool // the readers' connections
	path   string
	fromMs int64
	// conn is the writer's own connection (see batchWriter); writer only.
	conn *sqlite.Conn
	bw   *batchWriter
	// gen tells live files apart: a new one may take the name of the one
	// just sealed, and one reopened after a failed seal keeps its gen.
	gen int64
}

// writeConn is the writer's connection to the file, opened on first use
// with the readers' settings.
func (lf *liveFile) writeConn() (*sqlite.Conn, error) {
	if lf.conn != nil {
		return lf.conn, nil
	}
	// The file exists (openLiveDB made it, in WAL mode): no OpenCreate.
	c, err := sqlite.OpenConn(sqliteURI(lf.path, ""), sqlite.OpenReadWrite|sqlite.OpenURI)
	if err != nil {
		return nil, err
	}
	if err := prepareLive(c); err != nil {
		c.Close()
		return nil, err
	}
	lf.conn = c
	return c, nil
}

// dropConn closes the writer's connection; the next write opens a new one.
func (lf *liveFile) dropConn() {
	if lf.conn != nil {
		lf.conn.Close()
		lf.conn = nil
	}
}

// close closes the writer's statements and connection, then the readers'.
func (lf *liveFile) close() error {
	lf.dropConn()
	return lf.pool.Close()
}

// newLiveFile creates {Dir}/recorder/<worker>-<start_ms>.db, moving the
// start forward a millisecond while the name is taken.
func (r *Recorder) newLiveFile(ctx context.Context, startMs int64) (*liveFile, error) {
	path := filepath.Join(r.liveDir, fmt.Sprintf("%s-%d.db", r.cfg.Worker, startMs))
	for {
		if _, err := os.Lstat(path); errors.Is(err, os.ErrNotExist) {
			break
		}
		startMs++
		path = filepath.Join(r.liveDir, fmt.Sprintf("%s-%d.db", r.cfg.Worker, startMs))
	}
	pool, err := openLiveDB(ctx, path)
	if err != nil {
		removeDB(path)
		return nil, err
	}
	err = withPool(ctx, pool, func(c *sqlite.Conn) error {
		return setMeta(c, "format", strconv.Itoa(FormatVersion), "kind", "live",
			"worker", r.cfg.Worker, "cluster", r.cfg.Cluster, "from_ms", strconv.FormatInt(startMs, 10), "to_ms", "0")
	})
	if err != nil {
		pool.Close()
		removeDB(path)
		return nil, err
	}
	r.liveGen++
	return &liveFile{pool: pool, path: path, fromMs: startMs, gen: r.liveGen}, nil
}

// openLive installs a fresh live file.
func (r *Recorder) openLive(ctx context.Context, startMs int64) error {
	lf, err := r.newLiveFile(ctx, startMs)
	if err != nil {
		return err
	}
	r.liveMu.Lock()
	r.live = lf
	r.liveMu.Unlock()
	return nil
}

// liveSizeRetry is how long after a failed seal for size the next is tried
// (the seal interval's own tries go on).
const liveSizeRetry = 30 * time.Second

// liveOverSize reports whether the live file and its WAL take more than
// LiveMaxBytes on disk (not retried within liveSizeRetry of a failed seal
// for size). Writer only.
func (r *Recorder) liveOverSize() bool {
	lf := r.live
	if lf == nil || fileBytes(lf.path, lf.path+"-wal") <= r.cfg.LiveMaxBytes {
		return false
	}
	now := time.Now()
	if lf.gen == r.sizeSeal.gen && now.Sub(r.sizeSeal.at) < liveSizeRetry {
		return false
	}
	r.sizeSeal.gen, r.sizeSeal.at = lf.gen, now
	return true
}

// fileBytes sums the sizes of the files that exist among paths.
func fileBytes(paths ...string) int64 {
	var n int64
	for _, p := range paths {
		if fi, err := os.Stat(p); err == nil {
			n += fi.Size()
		}
	}
	return n
}

// closeLive closes the live database without sealing it.
func (r *Recorder) closeLive() {
	r.liveMu.Lock()
	defer r.liveMu.Unlock()
	if r.live != nil {
		r.live.close()
		r.live = nil
	}
}

// withLive runs fn on a reader's connection to the live database while no
// seal can swap it. With no live file (after shutdown) fn is not called.
func (r *Recorder) withLive(ctx context.Context, fn func(*sqlite.Conn) error) error {
	r.liveMu.RLock()
	defer r.liveMu.RUnlock()
	if r.live == nil {
		return nil
	}
	return withPool(ctx, r.live.pool, fn)
}

func withPool(ctx context.Context, pool *sqlitex.Pool, fn func(*sqlite.Conn) error) error {
	c, err := pool.Take(ctx)
	if err != nil {
		return ctxErr(ctx, err)
	}
	defer pool.Put(c)
	return ctxErr(ctx, fn(c))
}

// sealLive moves the live file into history and, unless final, starts a new
// one. An empty live file is not sealed: it keeps running, and at the final
// seal it is deleted.
func (r *Recorder) sealLive(ctx context.Context, final bool) error {
	lf := r.live
	if lf == nil {
		if final {
			return nil
		}
		return r.openLive(ctx, r.cfg.Now().UnixMilli())
	}
	var rows int64
	err := withPool(ctx, lf.pool, func(c *sqlite.Conn) error {
		return queryInts(c, `SELECT (SELECT count(*) FROM events) + (SELECT count(*) FROM tasks)`, &rows)
	})
	if err != nil {
		r.stats.sealErrors.Add(1)
		return fmt.Errorf("seal %s: count rows: %w", filepath.Base(lf.path), err)
	}
	if rows == 0 {
		if final {
			r.closeLive()
			removeDB(lf.path)
		}
		return nil
	}
	// Queries wait until the next live file is open, so they never see a
	// closed handle nor miss rows in flight between files.
	r.liveMu.Lock()
	defer r.liveMu.Unlock()
	lf.close()
	r.live = nil
	toMs := max(r.cfg.Now().UnixMilli(), lf.fromMs)
	name, err := r.sealFile(ctx, lf.path, r.cfg.Worker, lf.fromMs, toMs)
	if err != nil {
		r.stats.sealErrors.Add(1)
		r.log.Error("recorder_seal_failed", "file", filepath.Base(lf.path), "error", err)
		if !final {
			// Keep recording into the same file; the next tick retries.
			if pool, oerr := openLiveDB(ctx, lf.path); oerr == nil {
				withPool(ctx, pool, func(c *sqlite.Conn) error { return setMeta(c, "kind", "live", "to_ms", "0") })
				r.live = &liveFile{pool: pool, path: lf.path, fromMs: lf.fromMs, gen: lf.gen}
			}
		}
		return err
	}
	r.stats.seals.Add(1)
	r.addRecent(name)
	r.log.Info("recorder_sealed", "file", path.Join(append(r.histSegs(), name)...))
	if final {
		return nil
	}
	next, err := r.newLiveFile(ctx, toMs)
	if err != nil {
		r.log.Error("recorder_live_open_failed", "error", err)
		return err
	}
	r.live = next
	return nil
}

// sealFile finalises a closed live file and moves it, through the
// symlink-refusing walk, to history/<cluster>/<worker>-<from>-<to>.db with
// its .meta.json. On error the file is back at path.
func (r *Recorder) sealFile(ctx context.Context, path, worker string, fromMs, toMs int64) (string, error) {
	hist, err := r.openShared(true, false, r.histSegs()...)
	if err != nil {
		return "", fmt.Errorf("seal %s: %w", filepath.Base(path), err)
	}
	defer hist.close()
	name := fmt.Sprintf("%s-%d-%d.db", worker, fromMs, toMs)
	for hist.exists(name) {
		toMs++
		name = fmt.Sprintf("%s-%d-%d.db", worker, fromMs, toMs)
	}
	meta, err := finalizeDB(ctx, path, toMs)
	if err != nil {
		return "", err
	}
	meta.Kind, meta.Worker, meta.Cluster, meta.FromMs = "sealed", worker, r.cfg.Cluster, fromMs
	// Room first: the file moves in only once the history fits its budget
	// with it.
	r.makeRoom(hist, nil, fileBytes(path)+metaAllowance, nil)
	live, err := openDir(filepath.Dir(path), nil, false, nil)
	if err != nil {
		return "", fmt.Errorf("seal %s: %w", filepath.Base(path), err)
	}
	defer live.close()
	tmp := tempBase(name)
	if err := moveAt(live, filepath.Base(path), hist, tmp); err != nil {
		return "", fmt.Errorf("move %s: %w", filepath.Base(path), err)
	}
	if err := publishAt(hist, tmp, name, meta); err != nil {
		if merr := moveAt(hist, tmp, live, filepath.Base(path)); merr != nil {
			return "", errors.Join(err, merr)
		}
		return "", err
	}
	removeDB(path)
	return name, nil
}

// metaAllowance is what a .meta.json is counted for before it is written.
const metaAllowance = 1 << 10

// publishAt makes tmp in d visible as name: mode 0600, fsync, the
// .meta.json first (whoever sees the .db finds its meta), the rename, an
// fsync of the folder. On error the meta is removed and tmp stays.
func publishAt(d *dir, tmp, name string, meta fileMeta) error {
	data, _ := json.MarshalIndent(meta, "", "  ")
	f, _, err := d.openFile(tmp)
	if err == nil {
		err = f.Chmod(fileMode)
		if err == nil {
			err = f.Sync()
		}
		f.Close()
	}
	if err == nil {
		err = d.writeAtomic(name+".meta.json", data)
	}
	if err == nil {
		err = d.rename(tmp, d, name)
	}
	if err != nil {
		d.remove(name + ".meta.json")
		return fmt.Errorf("publish %s/%s: %w", d.rel, name, err)
	}
	d.sync()
	return nil
}

// finalizeDB checkpoints and leaves WAL mode, stamps to_ms and kind, and
// returns the row counts.
func finalizeDB(ctx context.Context, path string, toMs int64) (fileMeta, error) {
	var m fileMeta
	db, err := openConn(ctx, sqliteURI(path, ""), sqlite.OpenReadWrite)
	if err != nil {
		return m, fmt.Errorf("finalize %s: %w", filepath.Base(path), err)
	}
	db.SetBusyTimeout(5 * time.Second)
	var mode string
	if err = execSQL(db, `PRAGMA wal_checkpoint(TRUNCATE)`); err == nil {
		mode, err = queryText(db, `PRAGMA journal_mode=DELETE`)
	}
	if err == nil && !strings.EqualFold(mode, "delete") {
		err = fmt.Errorf("journal_mode is still %s", mode)
	}
	if err == nil {
		err = setMeta(db, "kind", "sealed", "to_ms", strconv.FormatInt(toMs, 10))
	}
	if err == nil {
		err = queryInts(db, `SELECT (SELECT count(*) FROM events), (SELECT count(*) FROM tasks)`, &m.Events, &m.Tasks)
	}
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return m, fmt.Errorf("finalize %s: %w", filepath.Base(path), err)
	}
	m.Format, m.ToMs = FormatVersion, toMs
	return m, nil
}

// addRecent remembers a file this process sealed, for Events and TaskResults.
func (r *Recorder) addRecent(name string) {
	r.recentMu.Lock()
	defer r.recentMu.Unlock()
	r.recent = append([]string{name}, r.recent...)
	if len(r.recent) > 3 {
		r.recent = r.recent[:3]
	}
}

// recentSealed returns this process's sealed files' segments, newest first.
func (r *Recorder) recentSealed() [][]string {
	r.recentMu.Lock()
	defer r.recentMu.Unlock()
	out := make([][]string, 0, len(r.recent))
	for _, name := range r.recent {
		out = append(out, append(r.histSegs(), name))
	}
	return out
}
