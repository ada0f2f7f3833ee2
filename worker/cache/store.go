package cache

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"svc/worker/config"
)

// Scopes of a row.
const (
	ScopeLocal   = "local"
	ScopeCluster = "cluster"
	ScopeGlobal  = "global"
)

// Bounds of one row.
const (
	MaxKeyBytes   = config.MaxCacheKeyBytes
	MaxValueBytes = config.MaxCacheValueBytes
)

// Errors of a write; a refused write changes nothing.
var (
	ErrBadKey        = fmt.Errorf("cache key must be 1-%d bytes of UTF-8", MaxKeyBytes)
	ErrValueTooLarge = fmt.Errorf("cache value over %d bytes", MaxValueBytes)
	ErrBadScope      = errors.New("cache scope must be local, cluster or global")
	ErrFull          = errors.New("cache full (cache.max_rows or cache.max_bytes)")
)

// Row is one cache entry.
type Row struct {
	Scope  string
	Key    string
	Value  []byte
	TSms   int64  // when it was written, epoch ms (see the package doc)
	Origin string // the worker that wrote it
}

func (r *Row) size() int64 { return int64(len(r.Key) + len(r.Value)) }

// wins reports whether r replaces a held row written at ts by origin.
func (r *Row) wins(ts int64, origin string) bool {
	return r.TSms > ts || (r.TSms == ts && r.Origin > origin)
}

// Config is what a Store needs.
type Config struct {
	Dir      string // storage.dir; "" keeps the rows in memory only
	Worker   string // worker.name: the origin of local writes, the file name
	MaxRows  int    // cache.max_rows
	MaxBytes int64  // cache.max_bytes: keys and values
	Logger   *slog.Logger
	Registry prometheus.Registerer // nil: a private one
	Now      func() time.Time      // nil: time.Now
}

// Store is the handler cache of one worker. Every method is safe for
// concurrent use; writes are serialized.
type Store struct {
	cfg        Config
	db         *sql.DB
	persistent bool
	epoch      string // tells this file's cursors from an earlier file's
	metrics    *metrics

	mu    sync.Mutex // serializes writes; guards clock
	clock int64      // newest timestamp of a local write

	rows, bytes          atomic.Int64
	markCluster, markGlb atomic.Int64
	version              atomic.Int64 // counts changes, for readers' snapshots
}

// Open opens the cache of cfg.Worker in cfg.Dir, creating the file (0600)
// and the folder (0700) when missing. Without cfg.Dir, or when the folder
// cannot hold the file, the rows are kept in memory (and a WARN says so).
func Open(ctx context.Context, cfg Config) (*Store, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Registry == nil {
		cfg.Registry = prometheus.NewRegistry()
	}
	if cfg.MaxRows <= 0 || cfg.MaxBytes <= 0 || cfg.Worker == "" {
		return nil, errors.New("open cache: worker name, max rows and max bytes are required")
	}
	s, log := &Store{cfg: cfg}, cfg.Logger.With("component", "cache")
	if cfg.Dir == "" {
		log.Warn("cache_engine_disabled_no_storage_dir",
			"detail", "cache.enabled with an empty storage.dir: the handler cache is memory-only and the cache exchange is off")
	} else if err := s.openFile(ctx); err != nil {
		log.Warn("cache_memory_only_fallback", "dir", cfg.Dir, "error", err.Error(),
			"detail", "the handler cache keeps its rows in memory only and the cache exchange is off")
	}
	if s.db == nil {
		var err error
		if s.db, err = openDB(ctx, ":memory:"); err != nil {
			return nil, fmt.Errorf("open memory cache: %w", err)
		}
	}
	if err := s.load(ctx); err != nil {
		s.db.Close()
		return nil, fmt.Errorf("open cache: %w", err)
	}
	s.metrics = newMetrics(cfg.Registry, s)
	return s, nil
}

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

// Persistent reports whether the rows are kept in storage.dir (and so
// whether the exchange may run).
func (s *Store) Persistent() bool { return s.persistent }

// Marks are the timestamps of this worker's newest cluster and global
// writes (0: none yet); they only rise.
func (s *Store) Marks() (cluster, global int64) { return s.markCluster.Load(), s.markGlb.Load() }

// Stats are the store's size and bounds.
type Stats struct {
	Rows, Bytes, MaxRows, MaxBytes int64
	Persistent                     bool
}

// Stats returns the current size and bounds.
func (s *Store) Stats() Stats {
	return Stats{Rows: s.rows.Load(), Bytes: s.bytes.Load(), MaxRows: int64(s.cfg.MaxRows), MaxBytes: s.cfg.MaxBytes, Persistent: s.persistent}
}

// CheckRow reports why a row from any source cannot be stored: a bad
// scope, key or value size.
func CheckRow(scope, key string, value []byte) error {
	switch {
	case scope != ScopeLocal && scope != ScopeCluster && scope != ScopeGlobal:
		return ErrBadScope
	case key == "" || len(key) > MaxKeyBytes || !utf8.ValidString(key):
		return ErrBadKey
	case len(value) > MaxValueBytes:
		return ErrValueTooLarge
	}
	return nil
}

// Put writes value under (scope, key) as this worker, stamped by the rule
// in the package doc.
func (s *Store) Put(ctx context.Context, scope, key string, value []byte) error {
	if err := CheckRow(scope, key, value); err != nil {
		s.metrics.count(sourceLocal, err)
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r := Row{Scope: scope, Key: key, Value: value, Origin: s.cfg.Worker, TSms: max(s.cfg.Now().UnixMilli(), s.clock+1)}
	var addRows, addBytes int64
	err := s.tx(ctx, func(tx *sql.Tx) error {
		held, ok, err := getRow(ctx, tx, scope, key)
		if err != nil {
			return err
		}
		if ok && held.TSms >= r.TSms {
			r.TSms = held.TSms + 1
		}
		var fit bool
		if addRows, addBytes, fit = s.fits(&r, held, ok, s.rows.Load(), s.bytes.Load()); !fit {
			return ErrFull
		}
		if err := upsert(ctx, tx, &r); err != nil {
			return err
		}
		if err := setMeta(ctx, tx, metaClock, r.TSms); err != nil {
			return err
		}
		if scope != ScopeLocal {
			return setMeta(ctx, tx, metaMark+scope, r.TSms)
		}
		return nil
	})
	if err == nil {
		s.rows.Add(addRows)
		s.bytes.Add(addBytes)
		s.version.Add(1)
		s.clock = r.TSms
		switch scope {
		case ScopeCluster:
			s.markCluster.Store(r.TSms)
		case ScopeGlobal:
			s.markGlb.Store(r.TSms)
		}
	}
	s.metrics.count(sourceLocal, err)
	return err
}

// fits reports whether r replacing held (ok: a row is held) keeps a
// store of rows and bytes within its bounds, and what it adds to both. A
// replacement that does not grow the store always fits.
func (s *Store) fits(r *Row, held Row, ok bool, rows, bytes int64) (addRows, addBytes int64, fit bool) {
	addRows, addBytes = 1, r.size()
	if ok {
		addRows, addBytes = 0, addBytes-held.size()
	}
	fit = (ok || rows < int64(s.cfg.MaxRows)) && (addBytes <= 0 || bytes+addBytes <= s.cfg.MaxBytes)
	return addRows, addBytes, fit
}

// Get returns the row of (scope, key).
func (s *Store) Get(ctx context.Context, scope, key string) (Row, bool, error) {
	return getRow(ctx, s.db, scope, key)
}

// Lookup returns the row of key in its most specific scope: local, else
// cluster, else global.
func (s *Store) Lookup(ctx context.Context, key string) (Row, bool, error) {
	return scanRow(s.db.QueryRowContext(ctx, `SELECT scope, key, value, ts_ms, origin FROM rows
		WHERE scope IN ('local', 'cluster', 'global') AND key = ?
		ORDER BY CASE scope WHEN 'local' THEN 0 WHEN 'cluster' THEN 1 ELSE 2 END LIMIT 1`, key))
}

// tx runs f in one transaction.
func (s *Store) tx(ctx context.Context, f func(*sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("write cache: %w", err)
	}
	if err := f(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("write cache: %w", err)
	}
	return nil
}
