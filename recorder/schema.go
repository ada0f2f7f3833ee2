package recorder

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"
)

// FormatVersion is the on-disk layout version written to every file's meta
// table and .meta.json (see docs/storage-format.md).
const FormatVersion = 1

// schemaVersion is the PRAGMA user_version of a file with the schema: the
// number of schema steps applied. The format has one step.
const schemaVersion = 1

// schema is the layout of every recorder file (docs/storage-format.md,
// section 3). task_labels carries its row's ts_ms, indexed so a label
// search reads the newest rows straight off the index.
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
		key_encoding      TEXT NOT NULL DEFAULT '',
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

// livePragmas are the settings of every connection to a live file. The
// page cache is 256 KiB, not 2 MB: the writer appends and readers are
// occasional, and the cache lives outside the Go heap (5 MiB less RSS in a
// backlog, same write cost). temp_store=MEMORY keeps the statement journal
// of multi-row INSERTs off the disk.
var livePragmas = []string{"synchronous(NORMAL)", "cache_size(-256)", "temp_store(MEMORY)"}

// liveReaders is how many connections the live file's readers share.
const liveReaders = 4

// openConn opens one connection to uri with flags; SQLite work on it stops
// when ctx ends.
func openConn(ctx context.Context, uri string, flags sqlite.OpenFlags) (*sqlite.Conn, error) {
	c, err := sqlite.OpenConn(uri, flags|sqlite.OpenURI)
	if err != nil {
		return nil, err
	}
	c.SetInterrupt(ctx.Done())
	return c, nil
}

// ctxErr names ctx's error as the cause of err when ctx has ended: SQLite
// reports work that ctx interrupted as "interrupted".
func ctxErr(ctx context.Context, err error) error {
	if err != nil && ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
		return fmt.Errorf("%w (%v)", ctx.Err(), err)
	}
	return err
}

// prepareLive gives a connection to a live file its settings.
func prepareLive(c *sqlite.Conn) error {
	c.SetBusyTimeout(liveBusyTimeout)
	for _, p := range livePragmas {
		if err := execSQL(c, "PRAGMA "+p); err != nil {
			return err
		}
	}
	return nil
}

// openLiveDB opens (creating if needed) a live file in WAL mode for its
// readers, and creates the schema in a new file.
func openLiveDB(ctx context.Context, path string) (*sqlitex.Pool, error) {
	if err := createPrivateFile(path); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, err
	}
	pool, err := sqlitex.NewPool(sqliteURI(path, ""), sqlitex.PoolOptions{
		Flags:    sqlite.OpenReadWrite | sqlite.OpenWAL | sqlite.OpenURI,
		PoolSize: liveReaders, PrepareConn: prepareLive,
	})
	if err != nil {
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	c, err := pool.Take(ctx)
	if err == nil {
		err = migrate(c)
		pool.Put(c)
	}
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("migrate %s: %w", path, err)
	}
	return pool, nil
}

// openBuildDB opens a new file that one goroutine fills (archive, merge):
// rollback journal, one connection.
func openBuildDB(ctx context.Context, path string) (*sqlite.Conn, error) {
	if err := createPrivateFile(path); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, err
	}
	c, err := openConn(ctx, sqliteURI(path, ""), sqlite.OpenReadWrite)
	if err != nil {
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	c.SetBusyTimeout(5 * time.Second)
	if err := execSQL(c, `PRAGMA journal_mode=DELETE`); err != nil {
		c.Close()
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	if err := migrate(c); err != nil {
		c.Close()
		return nil, fmt.Errorf("migrate %s: %w", path, err)
	}
	return c, nil
}

// execSQL runs one statement with args (bound by position). Statements are
// prepared once per connection and kept.
func execSQL(c *sqlite.Conn, query string, args ...any) error {
	return sqlitex.Execute(c, query, &sqlitex.ExecOptions{Args: args})
}

func query(c *sqlite.Conn, query string, row func(*sqlite.Stmt) error, args ...any) error {
	return sqlitex.Execute(c, query, &sqlitex.ExecOptions{Args: args, ResultFunc: row})
}

// queryInts runs a query returning one row of integers into dest.
func queryInts(c *sqlite.Conn, q string, dest ...*int64) error {
	n := 0
	err := query(c, q, func(st *sqlite.Stmt) error {
		for i, d := range dest {
			*d = st.ColumnInt64(i)
		}
		n++
		return nil
	})
	if err == nil && n != 1 {
		err = fmt.Errorf("%s: %d rows", q, n)
	}
	return err
}

func queryText(c *sqlite.Conn, q string) (string, error) {
	var out string
	err := query(c, q, func(st *sqlite.Stmt) error { out = st.ColumnText(0); return nil })
	return out, err
}

// checkVersion refuses a file whose schema is not this format's; schema
// names "main" or an attached database.
func checkVersion(c *sqlite.Conn, schema string) error {
	var v int64
	// PRAGMA takes no bind parameters; schema is "main" or "src".
	if err := queryInts(c, `PRAGMA `+schema+`.user_version`, &v); err != nil {
		return fmt.Errorf("read user_version: %w", err)
	}
	return versionError(int(v))
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
func migrate(c *sqlite.Conn) (err error) {
	var version int64
	if err := queryInts(c, `PRAGMA user_version`, &version); err != nil {
		return fmt.Errorf("read user_version: %w", err)
	}
	if version != 0 {
		return versionError(int(version))
	}
	defer sqlitex.Save(c)(&err)
	if err := sqlitex.ExecuteScript(c, schema, nil); err != nil {
		return fmt.Errorf("schema: %w", err)
	}
	// PRAGMA takes no bind parameters; schemaVersion is a constant.
	if err := execSQL(c, `PRAGMA user_version = `+strconv.Itoa(schemaVersion)); err != nil {
		return fmt.Errorf("set user_version: %w", err)
	}
	return nil
}

// setMeta upserts meta rows from alternating key, value pairs.
func setMeta(c *sqlite.Conn, kv ...string) error {
	for i := 0; i+1 < len(kv); i += 2 {
		if err := execSQL(c, `INSERT INTO meta(key, value) VALUES(?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value`,
			kv[i], kv[i+1]); err != nil {
			return fmt.Errorf("set meta %s: %w", kv[i], err)
		}
	}
	return nil
}
