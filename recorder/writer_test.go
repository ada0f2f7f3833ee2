package recorder

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"svc/worker/event"
)

// TestLiveWriterConn: the writer's own connection to a live file has the
// settings of the file's readers' connections, opens a path with the
// characters URIs give a meaning to, writes rows a reader reads back, and
// opens anew after dropConn.
func TestLiveWriterConn(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "a%20b?c#d")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "w-1.db")
	pool, err := openLiveDB(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	lf := &liveFile{pool: pool, path: path}
	defer lf.close()
	db, err := pool.Take(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Put(db)
	for pragma, want := range map[string]string{"synchronous": "1", "cache_size": "-256", "temp_store": "2", "busy_timeout": "5000"} {
		if got, err := queryText(db, "PRAGMA "+pragma); err != nil || got != want {
			t.Errorf("reader's PRAGMA %s = %s, %v; want %s", pragma, got, err, want)
		}
	}
	c, err := lf.writeConn()
	if err != nil {
		t.Fatalf("writeConn: %v", err)
	}
	for pragma, want := range map[string]string{
		"journal_mode": "wal", "synchronous": "1", "cache_size": "-256", "temp_store": "2", "busy_timeout": "5000",
	} {
		st, _, err := c.PrepareTransient("PRAGMA " + pragma)
		if err != nil {
			t.Fatal(err)
		}
		if row, err := st.Step(); err != nil || !row {
			t.Fatalf("PRAGMA %s: row %v, %v", pragma, row, err)
		}
		if got := st.ColumnText(0); got != want {
			t.Errorf("writer's PRAGMA %s = %s, want %s", pragma, got, want)
		}
		st.Finalize()
	}

	w := lf.batch(c)
	if err := w.exec(`BEGIN`); err != nil {
		t.Fatal(err)
	}
	row := event.TaskRow{TaskID: "t-1", TSms: 1700000000123, Worker: "w", Source: "kafka", Alias: "in", Partition: 3, Offset: 1 << 40,
		Key: "k\x00é", Labels: map[string]string{"tenant": "a\"b"}, Status: "ok", Attempts: 2, DurationMs: 7, OutputSizeBytes: 1024,
		KeyEncoding: "utf-8", Env: map[string]string{"SVC_KEY_ENCODING": "utf-8"}}
	if err := insertTask(w, &row, nil); err != nil {
		t.Fatal(err)
	}
	if err := w.flush(); err != nil {
		t.Fatal(err)
	}
	if err := w.exec(`COMMIT`); err != nil {
		t.Fatal(err)
	}
	var (
		id, key, labels, env, label string
		part, attempts              int
		off                         int64
	)
	if err := scan(db, `SELECT task_id, partition, "offset", key, labels, attempts, env FROM tasks`, []any{&id, &part, &off, &key, &labels, &attempts, &env}); err != nil {
		t.Fatal(err)
	}
	if id != "t-1" || part != 3 || off != 1<<40 || key != "k\x00é" || labels != `{"tenant":"a\"b"}` || attempts != 2 || env != `{"SVC_KEY_ENCODING":"utf-8"}` {
		t.Errorf("row read back: %q %d %d %q %s %d %s", id, part, off, key, labels, attempts, env)
	}
	if err := scan(db, `SELECT value FROM task_labels WHERE name = 'tenant' AND task_id = 't-1'`, []any{&label}); err != nil || label != `a"b` {
		t.Errorf("task_labels: %q, %v", label, err)
	}
	// After a failed batch the writer drops its connection; the next
	// batch opens a new one.
	lf.dropConn()
	c2, err := lf.writeConn()
	if err != nil || c2 == c {
		t.Fatalf("writeConn after dropConn: same %v, %v", c2 == c, err)
	}
	if err := lf.batch(c2).exec(`INSERT INTO sources(name) VALUES (?)`, str("kafka")); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := scan(db, `SELECT count(*) FROM sources`, []any{&n}); err != nil || n != 1 {
		t.Errorf("sources rows = %d, %v", n, err)
	}
}
