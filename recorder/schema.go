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
// table and .meta.json (see docs/storage-format.md).
const FormatVersion = 1

// schemaVersion is the PRAGMA user_version of a file with the schema: the
// number of schema steps applied. The format has one step.
const schemaVersion = 1

// schema is the layout of every recorder file (docs/storage-format.md,
// section 3). The sum_* columns of tasks stand for a successful task's
// lifecycle events, annotations and deliveries (summary.go); task_labels
// carries its task row's ts_ms, indexed so that a label search reads the
// newest rows of one label straight off the index (50,000 tasks of one
// archive: 97 ms → 0.5 ms against sorting every task with the label).
const schema = `CREATE TABLE meta (
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
		env               TEXT NOT NULL DEFAULT '{}',
		sum_received_id   INTEGER NOT NULL DEFAULT 0,
		sum_started_did   INTEGER NOT NULL DEFAULT 0,
		sum_finished_did  INTEGER NOT NULL DEFAULT 0,
		sum_received_ms   INTEGER NOT NULL DEFAULT 0,
		sum_started_dms   INTEGER NOT NULL DEFAULT 0,
		sum_finished_dms  INTEGER NOT NULL DEFAULT 0,
		sum_input_bytes   INTEGER NOT NULL DEFAULT 0,
		sum_attempt_ms    INTEGER NOT NULL DEFAULT 0,
		sum_events        TEXT NOT NULL DEFAULT '',
		sum_ann_top       INTEGER NOT NULL DEFAULT 0,
		sum_del_top       INTEGER NOT NULL DEFAULT 0
	);
	CREATE INDEX tasks_task_id ON tasks(task_id);
	CREATE INDEX tasks_sum_ann_top ON tasks(sum_ann_top) WHERE sum_ann_top != 0;
	CREATE INDEX tasks_sum_del_top ON tasks(sum_del_top) WHERE sum_del_top != 0;
	CREATE TABLE task_labels (
		name    TEXT NOT NULL,
		value   TEXT NOT NULL,
		task_id TEXT NOT NULL,
		ts_ms   INTEGER NOT NULL
	);
	CREATE INDEX task_labels_name_value_ts ON task_labels(name, value, ts_ms);
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

// checkVersion refuses a file whose schema is not this format's; schema
// names "main" or an attached database.
func checkVersion(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, schema string) error {
	var v int
	// PRAGMA takes no bind parameters; schema is "main" or "src".
	if err := q.QueryRowContext(ctx, `PRAGMA `+schema+`.user_version`).Scan(&v); err != nil {
		return fmt.Errorf("read user_version: %w", err)
	}
	return versionError(v)
}

// versionError says why a file of schema version v cannot be read.
func versionError(v int) error {
	if v != schemaVersion {
		return fmt.Errorf("schema version %d is not this build's (%d)", v, schemaVersion)
	}
	return nil
}

// migrate creates the schema in a new (empty) file and refuses a file of
// another version.
func migrate(ctx context.Context, db *sql.DB) error {
	var version int
	if err := db.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&version); err != nil {
		return fmt.Errorf("read user_version: %w", err)
	}
	if version != 0 {
		return versionError(version)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin schema: %w", err)
	}
	if _, err := tx.ExecContext(ctx, schema); err != nil {
		tx.Rollback()
		return fmt.Errorf("schema: %w", err)
	}
	// PRAGMA takes no bind parameters; schemaVersion is a constant.
	if _, err := tx.ExecContext(ctx, `PRAGMA user_version = `+strconv.Itoa(schemaVersion)); err != nil {
		tx.Rollback()
		return fmt.Errorf("set user_version: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit schema: %w", err)
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
