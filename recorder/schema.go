package recorder

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// FormatVersion is the on-disk layout version written to every file's meta
// table and .meta.json (see docs/storage-format.md). It changes only when a reader of the
// old layout would misread the new one.
const FormatVersion = 3

// schemaSteps returns the schema steps in order; PRAGMA user_version holds
// how many have run. Append new steps, never edit old ones.
func schemaSteps() []string { return []string{schemaStep1, schemaStep2, schemaStep3, schemaStep4} }

// schemaStep3 gives each task label its task row's ts_ms and indexes the
// labels by (name, value, ts_ms), so a label search reads the newest rows
// of one label straight off the index instead of sorting every task that
// carries it (50,000 tasks of one archive: 97 ms → 0.5 ms). A file
// migrated from step 2 (a live file recovered after a crash) gets its
// labels' ts_ms from their tasks.
const schemaStep3 = `ALTER TABLE task_labels ADD COLUMN ts_ms INTEGER NOT NULL DEFAULT 0;
	UPDATE task_labels SET ts_ms = coalesce((SELECT max(ts_ms) FROM tasks WHERE tasks.task_id = task_labels.task_id), 0);
	DROP INDEX task_labels_name_value;
	CREATE INDEX task_labels_name_value_ts ON task_labels(name, value, ts_ms);`

// labelTsVersion is the first schema version whose task_labels has ts_ms.
const labelTsVersion = 3

// schemaStep1 is the initial layout.
const schemaStep1 = `CREATE TABLE meta (
		key   TEXT PRIMARY KEY,
		value TEXT NOT NULL
	);
	CREATE TABLE events (
		id      INTEGER PRIMARY KEY,
		ts_ms   INTEGER NOT NULL,
		type    TEXT NOT NULL,
		kind    TEXT NOT NULL DEFAULT '',
		task_id TEXT NOT NULL DEFAULT '',
		worker  TEXT NOT NULL DEFAULT '',
		labels  TEXT NOT NULL DEFAULT '{}',
		payload TEXT NOT NULL DEFAULT 'null'
	);
	CREATE INDEX events_task_id ON events(task_id);
	CREATE INDEX events_type ON events(type);
	CREATE TABLE tasks (
		id                INTEGER PRIMARY KEY,
		task_id           TEXT NOT NULL,
		ts_ms             INTEGER NOT NULL,
		worker            TEXT NOT NULL DEFAULT '',
		source            TEXT NOT NULL DEFAULT '',
		alias             TEXT NOT NULL DEFAULT '',
		partition         INTEGER NOT NULL DEFAULT -1,
		"offset"          INTEGER NOT NULL DEFAULT -1,
		key               TEXT NOT NULL DEFAULT '',
		labels            TEXT NOT NULL DEFAULT '{}',
		status            TEXT NOT NULL DEFAULT '',
		attempts          INTEGER NOT NULL DEFAULT 0,
		duration_ms       INTEGER NOT NULL DEFAULT 0,
		error             TEXT NOT NULL DEFAULT '',
		output_size_bytes INTEGER NOT NULL DEFAULT 0,
		env               TEXT NOT NULL DEFAULT '{}'
	);
	CREATE INDEX tasks_task_id ON tasks(task_id);
	CREATE TABLE task_labels (
		name    TEXT NOT NULL,
		value   TEXT NOT NULL,
		task_id TEXT NOT NULL
	);
	CREATE INDEX task_labels_name_value ON task_labels(name, value);
	CREATE TABLE config_snapshots (
		id     INTEGER PRIMARY KEY,
		ts_ms  INTEGER NOT NULL,
		config TEXT NOT NULL
	);
	CREATE TABLE state_timeline (
		id     INTEGER PRIMARY KEY,
		ts_ms  INTEGER NOT NULL,
		state  TEXT NOT NULL,
		detail TEXT NOT NULL DEFAULT '{}'
	);
	CREATE TABLE sources (
		name TEXT PRIMARY KEY
	);`

// sqliteURI turns a file path into a SQLite URI with query parameters,
// escaping the characters URIs give a meaning to.
func sqliteURI(path, query string) string {
	esc := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path)
	if query == "" {
		return "file:" + esc
	}
	return "file:" + esc + "?" + query
}

// liveBusyTimeout is how long a live file's connections wait for a lock.
const liveBusyTimeout = 5 * time.Second

// livePragmas are the settings of every connection to a live file, the
// writer's (liveFile.writeConn) and db's (openLiveDB), besides the busy
// timeout and WAL mode.
var livePragmas = []string{"synchronous(NORMAL)", "cache_size(-256)", "temp_store(MEMORY)"}

// openLiveDB opens (creating if needed) a live file in WAL mode with a busy
// timeout, and applies the schema steps.
//
// Each connection's page cache is 256 KiB instead of SQLite's 2 MB: the
// writer appends (rowids and task ids grow, so the B-tree paths it walks
// are few) and readers are occasional UI queries, while the cache lives
// outside the Go heap (modernc's allocator rounds each 4 KiB page up to
// its 8 KiB size class): at the peak of a 20,000-message Kafka backlog
// SQLite's memory went from 13 to 8 MiB of the worker's RSS with it. The
// recorder's write cost did not change (BenchmarkSuccessfulTask, 100,000
// tasks: 28.6-31.0 µs of CPU a task with 2 MB, 28.7 µs with 256 KiB).
// temp_store=MEMORY keeps the statement journal of the writer's multi-row
// INSERTs in memory: on disk its writes were 3.6 % of the worker's CPU.
func openLiveDB(ctx context.Context, path string) (*sql.DB, error) {
	if err := createPrivateFile(path); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, err
	}
	query := fmt.Sprintf("_pragma=busy_timeout(%d)&_pragma=journal_mode(WAL)", liveBusyTimeout.Milliseconds())
	for _, p := range livePragmas {
		query += "&_pragma=" + p
	}
	db, err := sql.Open("sqlite", sqliteURI(path, query))
	if err != nil {
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	db.SetMaxOpenConns(4)
	if err := migrate(ctx, db); err != nil {
		db.Close()
		return nil, fmt.Errorf("migrate %s: %w", path, err)
	}
	return db, nil
}

// openBuildDB opens a new file that one goroutine fills (archive, merge):
// rollback journal, one connection so ATTACH applies to every statement.
func openBuildDB(ctx context.Context, path string) (*sql.DB, error) {
	if err := createPrivateFile(path); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, err
	}
	db, err := sql.Open("sqlite", sqliteURI(path, "_pragma=busy_timeout(5000)&_pragma=journal_mode(DELETE)"))
	if err != nil {
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	if err := migrate(ctx, db); err != nil {
		db.Close()
		return nil, fmt.Errorf("migrate %s: %w", path, err)
	}
	return db, nil
}

// openReadOnly opens a finished (sealed, archived, merged) file. immutable=1
// skips locking and never creates -wal or -shm files beside it, which keeps
// the shared folder clean and works on read-only mounts.
func openReadOnly(path string) (*sql.DB, error) {
	db, err := sql.Open("sqlite", sqliteURI(path, "mode=ro&immutable=1"))
	if err != nil {
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	return db, nil
}

// checkVersion refuses a file written by a newer schema than this build
// knows; schema names "main" or an attached database.
func checkVersion(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, schema string) error {
	var v int
	// PRAGMA takes no bind parameters; schema is "main" or "src".
	if err := q.QueryRowContext(ctx, `PRAGMA `+schema+`.user_version`).Scan(&v); err != nil {
		return fmt.Errorf("read user_version: %w", err)
	}
	if v > len(schemaSteps()) {
		return fmt.Errorf("schema version %d is newer than this build (%d)", v, len(schemaSteps()))
	}
	return nil
}

// migrate applies the schema steps not yet recorded in user_version.
func migrate(ctx context.Context, db *sql.DB) error {
	var version int
	if err := db.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&version); err != nil {
		return fmt.Errorf("read user_version: %w", err)
	}
	steps := schemaSteps()
	if version > len(steps) {
		return fmt.Errorf("schema version %d is newer than this build (%d)", version, len(steps))
	}
	for i := version; i < len(steps); i++ {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return fmt.Errorf("begin schema step %d: %w", i+1, err)
		}
		if _, err := tx.ExecContext(ctx, steps[i]); err != nil {
			tx.Rollback()
			return fmt.Errorf("schema step %d: %w", i+1, err)
		}
		// PRAGMA takes no bind parameters; i is an int we control.
		if _, err := tx.ExecContext(ctx, `PRAGMA user_version = `+strconv.Itoa(i+1)); err != nil {
			tx.Rollback()
			return fmt.Errorf("set user_version %d: %w", i+1, err)
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("commit schema step %d: %w", i+1, err)
		}
	}
	return nil
}

// execer is the part of *sql.DB, *sql.Tx and *sql.Conn the meta helpers use.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// setMeta upserts meta rows from alternating key, value pairs.
func setMeta(ctx context.Context, db execer, kv ...string) error {
	for i := 0; i+1 < len(kv); i += 2 {
		if _, err := db.ExecContext(ctx,
			`INSERT INTO meta(key, value) VALUES(?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value`,
			kv[i], kv[i+1]); err != nil {
			return fmt.Errorf("set meta %s: %w", kv[i], err)
		}
	}
	return nil
}

// readMeta returns the meta table as a map.
func readMeta(ctx context.Context, db *sql.DB) (map[string]string, error) {
	rows, err := db.QueryContext(ctx, `SELECT key, value FROM meta`)
	if err != nil {
		return nil, fmt.Errorf("read meta: %w", err)
	}
	defer rows.Close()
	m := map[string]string{}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return nil, fmt.Errorf("read meta: %w", err)
		}
		m[k] = v
	}
	return m, rows.Err()
}
