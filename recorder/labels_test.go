package recorder

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
)

// TestLabelSearchNewestFirst: a label on 300 tasks answers its newest 100
// (newest first) from the live file and, the same, from the sealed file;
// a search by the label's name alike.
func TestLabelSearchNewestFirst(t *testing.T) {
	t.Parallel()
	clk := newClock()
	r := mustOpen(t, baseConfig(t, t.TempDir(), t.TempDir(), "w1", clk))
	startRun(t, r)
	const n = 300
	for i := range n {
		r.Task(TaskRow{TaskID: fmt.Sprintf("t%03d", i), TSms: clk.tick().UnixMilli(), Source: "http", Status: "ok", Attempts: 1,
			Labels: map[string]string{"batch": "x", "shard": fmt.Sprint(i % 3)}})
	}
	waitWritten(t, r, 0, n)
	check := func(where string) {
		t.Helper()
		for _, q := range []struct {
			name  string
			value *string
		}{{"batch", ptr("x")}, {"batch", nil}} {
			rows, err := r.TraceByLabelIn(t.Context(), q.name, q.value, 100, ScopeCluster)
			if err != nil || len(rows) != 100 {
				t.Fatalf("%s: label %s=%v: %d rows, %v; want 100", where, q.name, q.value, len(rows), err)
			}
			for i, row := range rows {
				if want := fmt.Sprintf("t%03d", n-1-i); row.TaskID != want {
					t.Fatalf("%s: label %s=%v row %d = %s, want %s (newest first)", where, q.name, q.value, i, row.TaskID, want)
				}
			}
		}
		rows, err := r.TraceByLabel(t.Context(), "shard", "1", 5)
		if err != nil || len(rows) != 5 || rows[0].TaskID != "t298" || rows[4].TaskID != "t286" {
			t.Fatalf("%s: shard=1: %+v, %v; want t298 ... t286", where, rows, err)
		}
	}
	check("live file")
	seal(t, r)
	check("sealed file")
}

func ptr(s string) *string { return &s }

// v2File writes a database at schema step 2 (before label ts_ms) holding
// tasks t0..t(n-1) at ts 1000+i, each labelled batch=x.
func v2File(t *testing.T, path string, n int) {
	t.Helper()
	db, err := sql.Open("sqlite", sqliteURI(path, ""))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, step := range schemaSteps()[:2] {
		if _, err := db.Exec(step); err != nil {
			t.Fatal(err)
		}
	}
	db.Exec(`PRAGMA user_version = 2`)
	for i := range n {
		id := fmt.Sprintf("t%d", i)
		if _, err := db.Exec(`INSERT INTO tasks(task_id, ts_ms, status) VALUES(?, ?, 'ok')`, id, 1000+i); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(`INSERT INTO task_labels(name, value, task_id) VALUES('batch', 'x', ?)`, id); err != nil {
			t.Fatal(err)
		}
	}
}

// checkLabelTs checks every label row of db has its task's ts_ms and a
// label search reads the newest first.
func checkLabelTs(t *testing.T, r *Recorder, db *sql.DB, n int) {
	t.Helper()
	var bad int
	if err := db.QueryRow(`SELECT count(*) FROM task_labels l WHERE ts_ms != (SELECT ts_ms FROM tasks WHERE task_id = l.task_id)`).Scan(&bad); err != nil || bad != 0 {
		t.Fatalf("%d label rows without their task's ts_ms (%v)", bad, err)
	}
	q, args := labelQuery(labelTsVersion, "batch", ptr("x"), 3)
	rows, err := r.queryTasks(context.Background(), db, q, args...)
	if err != nil || len(rows) != 3 || rows[0].TaskID != fmt.Sprintf("t%d", n-1) || rows[2].TaskID != fmt.Sprintf("t%d", n-3) {
		t.Fatalf("newest 3 of batch=x: %+v, %v", rows, err)
	}
}

// TestLabelTsFromOlderFiles: a step-2 file migrated to step 3 (a live file
// recovered after a crash), and an archive folding a step-2 sealed file,
// give every label its task's ts_ms, so the label search still reads the
// newest first.
func TestLabelTsFromOlderFiles(t *testing.T) {
	t.Parallel()
	r := mustOpen(t, Config{Worker: "w", Cluster: "c"})
	dir := t.TempDir()
	const n = 50

	migrated := filepath.Join(dir, "migrated.db")
	v2File(t, migrated, n)
	db, err := sql.Open("sqlite", sqliteURI(migrated, ""))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := migrate(t.Context(), db); err != nil {
		t.Fatal(err)
	}
	checkLabelTs(t, r, db, n)

	src := filepath.Join(dir, "sealed.db")
	v2File(t, src, n)
	arch, err := sql.Open("sqlite", sqliteURI(filepath.Join(dir, "archive.db"), ""))
	if err != nil {
		t.Fatal(err)
	}
	defer arch.Close()
	arch.SetMaxOpenConns(1)
	if err := migrate(t.Context(), arch); err != nil {
		t.Fatal(err)
	}
	if _, err := copyFrom(t.Context(), arch, sqliteURI(src, "mode=ro"), "sealed.db"); err != nil {
		t.Fatal(err)
	}
	checkLabelTs(t, r, arch, n)
}
