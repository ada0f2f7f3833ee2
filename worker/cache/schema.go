package cache

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"

	_ "modernc.org/sqlite" // the "sqlite" database/sql driver
)

// schemaVersion is the PRAGMA user_version this build writes.
const schemaVersion = 1

// Meta names.
const (
	metaEpoch = "epoch"
	metaClock = "clock"
	metaMark  = "mark_" // + scope
)

const schema = `
CREATE TABLE IF NOT EXISTS rows (
	scope  TEXT NOT NULL,
	key    TEXT NOT NULL,
	value  BLOB NOT NULL,
	ts_ms  INTEGER NOT NULL,
	origin TEXT NOT NULL,
	PRIMARY KEY (scope, key)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS rows_origin_ts ON rows (origin, ts_ms);
CREATE TABLE IF NOT EXISTS meta (
	name  TEXT PRIMARY KEY,
	value TEXT NOT NULL
) WITHOUT ROWID;
PRAGMA user_version = 1;
`

// FileName is the cache file of worker inside storage.dir.
func FileName(worker string) string { return worker + ".cache.db" }

// openFile opens {Dir}/{worker}.cache.db, creating the folder (0700) and
// the file (0600) when missing; a symlink in the file's place is refused.
func (s *Store) openFile(ctx context.Context) error {
	if err := os.MkdirAll(s.cfg.Dir, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", s.cfg.Dir, err)
	}
	path := filepath.Join(s.cfg.Dir, FileName(s.cfg.Worker))
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	err = f.Chmod(0o600)
	f.Close()
	if err != nil {
		return fmt.Errorf("chmod %s: %w", path, err)
	}
	esc := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path)
	db, err := openDB(ctx, "file:"+esc+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)")
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	s.db, s.persistent = db, true
	return nil
}

// openDB opens dsn on one connection that the pool keeps (an in-memory
// database lives in it) and applies the schema; a file of a newer schema
// is refused.
func openDB(ctx context.Context, dsn string) (*sql.DB, error) {
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	var v int
	if err = db.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&v); err != nil {
		err = fmt.Errorf("read schema version: %w", err)
	} else if v > schemaVersion {
		err = fmt.Errorf("cache file has schema %d, newer than this build's %d", v, schemaVersion)
	} else if _, err = db.ExecContext(ctx, schema); err != nil {
		err = fmt.Errorf("apply schema: %w", err)
	}
	if err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// load reads the epoch, the clock, the marks and the size counters.
func (s *Store) load(ctx context.Context) error {
	meta := map[string]string{}
	rs, err := s.db.QueryContext(ctx, `SELECT name, value FROM meta`)
	if err != nil {
		return err
	}
	for rs.Next() {
		var k, v string
		if err := rs.Scan(&k, &v); err != nil {
			rs.Close()
			return err
		}
		meta[k] = v
	}
	rs.Close()
	if err := rs.Err(); err != nil {
		return err
	}
	s.epoch = meta[metaEpoch]
	if !epochPattern.MatchString(s.epoch) {
		var b [8]byte
		_, _ = rand.Read(b[:])
		s.epoch = hex.EncodeToString(b[:])
		if _, err := s.db.ExecContext(ctx, `INSERT OR REPLACE INTO meta (name, value) VALUES (?, ?)`, metaEpoch, s.epoch); err != nil {
			return err
		}
	}
	num := func(k string) int64 { n, _ := strconv.ParseInt(meta[k], 10, 64); return max(n, 0) }
	var own sql.NullInt64
	if err := s.db.QueryRowContext(ctx, `SELECT MAX(ts_ms) FROM rows WHERE origin = ?`, s.cfg.Worker).Scan(&own); err != nil {
		return err
	}
	s.clock = max(num(metaClock), own.Int64)
	s.markCluster.Store(num(metaMark + ScopeCluster))
	s.markGlb.Store(num(metaMark + ScopeGlobal))
	var n, b int64
	if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*), COALESCE(SUM(length(CAST(key AS BLOB)) + length(value)), 0) FROM rows`).Scan(&n, &b); err != nil {
		return err
	}
	s.rows.Store(n)
	s.bytes.Store(b)
	return nil
}

// epochPattern is a file's epoch: 16 lowercase hex digits.
var epochPattern = regexp.MustCompile(`^[0-9a-f]{16}$`)

// querier is what both *sql.DB and *sql.Tx offer.
type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func getRow(ctx context.Context, q querier, scope, key string) (Row, bool, error) {
	return scanRow(q.QueryRowContext(ctx, `SELECT scope, key, value, ts_ms, origin FROM rows
		WHERE scope = ? AND key = ?`, scope, key))
}

// scanRow reads the row a query of every column found; false when none.
func scanRow(q *sql.Row) (Row, bool, error) {
	var r Row
	err := q.Scan(&r.Scope, &r.Key, &r.Value, &r.TSms, &r.Origin)
	if errors.Is(err, sql.ErrNoRows) {
		return Row{}, false, nil
	}
	if err != nil {
		return Row{}, false, fmt.Errorf("read cache: %w", err)
	}
	return r, true, nil
}

func upsert(ctx context.Context, tx *sql.Tx, r *Row) error {
	value := r.Value
	if value == nil {
		value = []byte{} // NOT NULL: an empty value is a value
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO rows (scope, key, value, ts_ms, origin) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (scope, key) DO UPDATE SET value = excluded.value, ts_ms = excluded.ts_ms, origin = excluded.origin`,
		r.Scope, r.Key, value, r.TSms, r.Origin)
	if err != nil {
		return fmt.Errorf("write cache: %w", err)
	}
	return nil
}

func setMeta(ctx context.Context, tx *sql.Tx, name string, v int64) error {
	_, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO meta (name, value) VALUES (?, ?)`, name, strconv.FormatInt(v, 10))
	if err != nil {
		return fmt.Errorf("write cache: %w", err)
	}
	return nil
}
