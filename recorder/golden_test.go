package recorder

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"svc/worker/config"

	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"
)

var update = flag.Bool("update", false, "rebuild the SQLite files of testdata/recorder/shared-v1 from docs/storage-format.md")

// goldenDir is the hand-written shared folder (see its README.md).
const goldenDir = "../testdata/recorder/shared-v1"

// goldenFile is one database of the fixture: its path and the rows put in
// it, as SQL against the schema of docs/storage-format.md.
type goldenFile struct {
	path string // relative to goldenDir; .db.gz is gzipped after building
	rows []string
}

// goldenFiles are the fixture's databases. Ids follow the doc: a sealed
// file keeps the worker's event ids (start time × 1000 onwards), archives
// and merge results number their rows themselves.
var goldenFiles = []goldenFile{
	{"history/c1/w1-1700000000000-1700000600000.db", []string{
		`INSERT INTO meta VALUES ('format','1'),('kind','sealed'),('worker','w1'),('cluster','c1'),('from_ms','1700000000000'),('to_ms','1700000600000')`,
		`INSERT INTO events VALUES
			(1700000000000001, 1700000000100, 'state', 'running', '', 'w1', '{}', '{"state":"running","detail":{}}'),
			(1700000000000002, 1700000000200, 'config_snapshot', '', '', 'w1', '{}', '{"worker":{"name":"w1"}}'),
			(1700000000000003, 1700000100000, 'executor_started', '', 'order-7', 'w1', '{"order":"7"}', '{"attempt":2}'),
			(1700000000000004, 1700000100250, 'executor_finished', '', 'order-7', 'w1', '{"order":"7"}', '{"status":"ok","exit_code":0,"duration_ms":250,"output_size_bytes":12}'),
			(1700000000000005, 1700000200000, 'annotation', 'progress', 'order-8', 'w1', '{}', '{"pct":50}')`,
		`INSERT INTO tasks(id, task_id, ts_ms, worker, source, alias, partition, "offset", key, labels, status, attempts, duration_ms, error, output_size_bytes, env) VALUES (1, 'order-7', 1700000100300, 'w1', 'kafka', 'orders', 2, 41, 'k7', '{"order":"7"}', 'ok', 2, 250, '', 12, '{"API_TOKEN":"***","REGION":"eu"}')`,
		`INSERT INTO task_labels VALUES ('order', '7', 'order-7', 1700000100300)`,
		`INSERT INTO config_snapshots VALUES (1, 1700000000200, '{"worker":{"name":"w1"}}')`,
		`INSERT INTO state_timeline VALUES (1, 1700000000100, 'running', '{}')`,
	}},
	{"history/c1/w-2-1700000300000-1700000900000.db", []string{
		`INSERT INTO meta VALUES ('format','1'),('kind','sealed'),('worker','w-2'),('cluster','c1'),('from_ms','1700000300000'),('to_ms','1700000900000')`,
		`INSERT INTO events VALUES
			(1700000300000001, 1700000400000, 'sink_delivered', '', 'order-7', 'w-2', '{"order":"7"}', '{"sink":"results","topic":"out","partition":0,"offset":9}'),
			(1700000300000002, 1700000500000, 'task_received', '', 'order-9', 'w-2', '{}', '{"source":"http"}')`,
		`INSERT INTO tasks(id, task_id, ts_ms, worker, source, alias, partition, "offset", key, labels, status, attempts, duration_ms, error, output_size_bytes, env) VALUES (1, 'order-9', 1700000500100, 'w-2', 'http', '', -1, -1, '', '{}', 'failed', 3, 40, 'exit status 1', 0, '{}')`,
	}},
	{"history/c1/c1-1699992000000.db.gz", []string{
		`INSERT INTO meta VALUES ('format','1'),('kind','archive'),('cluster','c1'),('window_start_ms','1699992000000'),('window_ms','3600000'),('from_ms','1699992000000'),('to_ms','1699992600000')`,
		`INSERT INTO events VALUES
			(1, 1699992100000, 'task_received', '', 'order-7', 'w1', '{"order":"7"}', '{"source":"kafka","alias":"orders","partition":2,"offset":41,"key":"k7"}'),
			(2, 1699992100500, 'executor_finished', '', 'order-7', 'w1', '{"order":"7"}', '{"status":"tempfail","exit_code":75,"duration_ms":500,"output_size_bytes":0}')`,
		`INSERT INTO tasks(id, task_id, ts_ms, worker, source, alias, partition, "offset", key, labels, status, attempts, duration_ms, error, output_size_bytes, env) VALUES (1, 'order-7', 1699992100600, 'w1', 'kafka', 'orders', 2, 41, 'k7', '{"order":"7"}', 'tempfail', 1, 500, 'exit status 75', 0, '{}')`,
		`INSERT INTO task_labels VALUES ('order', '7', 'order-7', 1699992100600)`,
		`INSERT INTO sources VALUES ('w1-1699992000000-1699992600000.db')`,
	}},
	{"history/c2/w3-1700000000000-1700000600000.db", []string{
		`INSERT INTO meta VALUES ('format','1'),('kind','sealed'),('worker','w3'),('cluster','c2'),('from_ms','1700000000000'),('to_ms','1700000600000')`,
		`INSERT INTO events VALUES (1700000000000001, 1700000050000, 'task_received', '', 'c2-task', 'w3', '{}', '{"source":"http"}')`,
	}},
	{"merged/merged-1700001000000-0123456789abcdef.db", []string{
		`INSERT INTO meta VALUES ('format','1'),('kind','merged'),('worker','w1'),('cluster','c1'),('from_ms','1700000000000'),('to_ms','1700000600000')`,
		`INSERT INTO events VALUES
			(1, 1700000100250, 'executor_finished', '', 'order-7', 'w1', '{"order":"7"}', '{"status":"ok","exit_code":0,"duration_ms":250,"output_size_bytes":12}'),
			(2, 1700000050000, 'task_received', '', 'c2-task', 'w3', '{}', '{"source":"http"}')`,
		`INSERT INTO sources VALUES ('history/c1/w1-1700000000000-1700000600000.db'), ('history/c2/w3-1700000000000-1700000600000.db')`,
	}},
}

// docSchema returns the SQL block of docs/storage-format.md section 3:
// the schema every file of the format has.
func docSchema(t testing.TB) string {
	t.Helper()
	doc, err := os.ReadFile("../docs/storage-format.md")
	if err != nil {
		t.Fatal(err)
	}
	sec := regexp.MustCompile("(?s)## 3\\. Database schema(.*?)\n## 4\\.").FindSubmatch(doc)
	if sec == nil {
		t.Fatal("no section 3 in docs/storage-format.md")
	}
	blocks := regexp.MustCompile("(?s)```sql\n(.*?)```").FindAllSubmatch(sec[1], -1)
	if len(blocks) != 1 {
		t.Fatalf("docs/storage-format.md section 3 has %d SQL blocks, want the one schema", len(blocks))
	}
	return string(blocks[0][1])
}

// buildGolden rebuilds the fixture's databases from the doc's schema.
func buildGolden(t *testing.T) {
	schema := docSchema(t)
	for _, g := range goldenFiles {
		dst := filepath.Join(goldenDir, filepath.FromSlash(g.path))
		build := strings.TrimSuffix(dst, ".gz")
		if strings.HasSuffix(g.path, ".gz") {
			build = filepath.Join(t.TempDir(), "archive.db")
		}
		os.Remove(build)
		db := openTestConn(t, build)
		stmts := append([]string{`PRAGMA page_size = 512`, schema, `PRAGMA user_version = ` + itoa(schemaVersion)}, g.rows...)
		for _, s := range append(stmts, `VACUUM`) {
			run := sqlitex.ExecuteTransient // one statement; VACUUM runs outside a transaction
			if s == schema {
				run = sqlitex.ExecuteScript
			}
			if err := run(db, s, nil); err != nil {
				t.Fatalf("%s: %v\n%s", g.path, err, s)
			}
		}
		db.Close()
		if strings.HasSuffix(g.path, ".gz") {
			data, _ := os.ReadFile(build)
			var buf bytes.Buffer
			zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
			zw.Write(data)
			zw.Close()
			if err := os.WriteFile(dst, buf.Bytes(), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// copyTree copies the fixture into a fresh folder (modes 0700/0600, as a
// worker would have them; git keeps neither).
func copyTree(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o700)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), data, 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// TestGoldenSharedFolder opens the hand-written folder of
// testdata/recorder/shared-v1 as a worker of cluster c1: it must list it,
// trace across its sealed files and archive, and merge its files, and the
// files the recorder writes itself must carry the doc's schema.
func TestGoldenSharedFolder(t *testing.T) {
	if *update {
		buildGolden(t)
	}
	checkGoldenConsistent(t)
	shared := copyTree(t, goldenDir)
	r := mustOpen(t, baseConfig(t, "", shared, "reader", newClock()))

	t.Run("list", func(t *testing.T) {
		var got []string
		for _, d := range mustDatabases(t, r) {
			got = append(got, strings.Join([]string{d.Path, d.Kind, d.Worker, d.Cluster, itoa(int(d.FromMs)), itoa(int(d.ToMs))}, " "))
		}
		want := []string{
			"history/c1/w-2-1700000300000-1700000900000.db sealed w-2 c1 1700000300000 1700000900000",
			"history/c1/w1-1700000000000-1700000600000.db sealed w1 c1 1700000000000 1700000600000",
			"merged/merged-1700001000000-0123456789abcdef.db merged w1 c1 1700000000000 1700000600000",
			"history/c1/c1-1699992000000.db.gz archive  c1 1699992000000 1699992600000",
		}
		if !slices.Equal(got, want) {
			t.Errorf("Databases() =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	})

	t.Run("trace", func(t *testing.T) {
		evs, err := r.Trace(t.Context(), "order-7")
		if err != nil {
			t.Fatalf("Trace() error = %v", err)
		}
		var got []string
		for _, e := range evs {
			got = append(got, strings.Join([]string{itoa(int(e.TSms)), e.Type, e.Worker, e.Labels["order"], string(e.Payload)}, " "))
		}
		want := []string{
			`1699992100000 task_received w1 7 {"source":"kafka","alias":"orders","partition":2,"offset":41,"key":"k7"}`,
			`1699992100500 executor_finished w1 7 {"status":"tempfail","exit_code":75,"duration_ms":500,"output_size_bytes":0}`,
			`1700000100000 executor_started w1 7 {"attempt":2}`,
			`1700000100250 executor_finished w1 7 {"status":"ok","exit_code":0,"duration_ms":250,"output_size_bytes":12}`,
			`1700000400000 sink_delivered w-2 7 {"sink":"results","topic":"out","partition":0,"offset":9}`,
		}
		if !slices.Equal(got, want) {
			t.Errorf("Trace(order-7) =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		if evs, _ := r.Trace(t.Context(), "c2-task"); len(evs) != 0 {
			t.Errorf("Trace(c2-task) = %v, want nothing from another cluster", evs)
		}
		rows, err := r.TraceByLabel(t.Context(), "order", "7", 10)
		if err != nil || len(rows) != 2 || rows[0].Status != "ok" || rows[1].Status != "tempfail" ||
			rows[0].Env["API_TOKEN"] != config.Mask || rows[0].Partition != 2 || rows[0].Offset != 41 {
			t.Errorf("TraceByLabel(order=7) = %+v, %v; want the ok row (masked env) then the tempfail row", rows, err)
		}
	})

	t.Run("merge", func(t *testing.T) {
		paths := []string{
			"history/c1/w1-1700000000000-1700000600000.db",
			"history/c1/w-2-1700000300000-1700000900000.db",
			"merged/merged-1700001000000-0123456789abcdef.db",
			"history/c2/w3-1700000000000-1700000600000.db",
		}
		res, err := r.Merge(t.Context(), paths)
		if err != nil || res.Events != 5+2+2+1 {
			t.Fatalf("Merge() = %+v, %v; want 10 events", res, err)
		}
		data, err := os.ReadFile(filepath.Join(shared, filepath.FromSlash(res.Path)) + ".meta.json")
		var m fileMeta
		if err != nil || json.Unmarshal(data, &m) != nil || m.Kind != "merged" || m.Tasks != 2 ||
			m.FromMs != 1700000000000 || m.ToMs != 1700000900000 || !slices.Equal(m.Sources, paths) {
			t.Errorf("merge result meta = %s, %v; want kind merged, 2 tasks, range 1700000000000-1700000900000, sources %v", data, err, paths)
		}
		// A file this recorder wrote has exactly the doc's schema.
		f, _, err := r.openSharedFile(strings.Split(res.Path, "/"), false)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		got, err := queryOpen(t.Context(), r, f, schemaOf)
		want := schemaFromDoc(t)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("schema of a recorder-written file =\n%s\nwant the doc's\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	})
}

// checkGoldenConsistent checks the fixture against the doc: every database
// has its .meta.json with matching counts, user_version 1, no WAL.
func checkGoldenConsistent(t *testing.T) {
	t.Helper()
	for _, g := range goldenFiles {
		path := filepath.Join(goldenDir, filepath.FromSlash(g.path))
		data, err := os.ReadFile(path + ".meta.json")
		var m fileMeta
		if err != nil || json.Unmarshal(data, &m) != nil {
			t.Fatalf("%s.meta.json: %v", g.path, err)
		}
		if strings.HasSuffix(path, ".gz") {
			gz, _ := os.ReadFile(path)
			zr, err := gzip.NewReader(bytes.NewReader(gz))
			if err != nil {
				t.Fatalf("%s: %v (run with -update?)", g.path, err)
			}
			var buf bytes.Buffer
			buf.ReadFrom(zr)
			path = filepath.Join(t.TempDir(), "archive.db")
			os.WriteFile(path, buf.Bytes(), 0o600)
		}
		db, err := openReadOnly(t.Context(), path)
		if err != nil {
			t.Fatal(err)
		}
		var events, tasks int64
		var version int
		var mode string
		err = scan(db, `SELECT (SELECT count(*) FROM events), (SELECT count(*) FROM tasks)`, []any{&events, &tasks})
		if err == nil {
			err = scan(db, `PRAGMA user_version`, []any{&version})
		}
		if err == nil {
			err = scan(db, `PRAGMA journal_mode`, []any{&mode})
		}
		db.Close()
		if err != nil || events != m.Events || tasks != m.Tasks || version != schemaVersion || mode != "delete" {
			t.Errorf("%s: %d events, %d tasks, user_version %d, journal %s, %v; .meta.json says %d and %d (run with -update?)",
				g.path, events, tasks, version, mode, err, m.Events, m.Tasks)
		}
	}
}

// schemaOf lists a database's schema statements, whitespace removed.
func schemaOf(db *sqlite.Conn) ([]string, error) {
	rows, err := texts(db, `SELECT sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY name`)
	for i, s := range rows {
		rows[i] = strings.Join(strings.Fields(s), "")
	}
	return rows, err
}

// schemaFromDoc builds the doc's schema in a scratch database and lists it
// like schemaOf.
func schemaFromDoc(t *testing.T) []string {
	t.Helper()
	db := openTestConn(t, filepath.Join(t.TempDir(), "doc.db"))
	defer db.Close()
	if err := sqlitex.ExecuteScript(db, docSchema(t), nil); err != nil {
		t.Fatal(err)
	}
	out, err := schemaOf(db)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestDocsStateFormatVersion: docs/storage-format.md (title, meta key,
// .meta.json example) and the package doc state the format this build
// writes.
func TestDocsStateFormatVersion(t *testing.T) {
	v := itoa(FormatVersion)
	doc, err := os.ReadFile("../docs/storage-format.md")
	if err != nil {
		t.Fatal(err)
	}
	pkg, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		where string
		text  []byte
		re    string
	}{
		{"docs/storage-format.md title", doc, `(?m)^# Flight recorder on-disk format, version (\d+)$`},
		{"docs/storage-format.md meta format", doc, "(?m)^\\| `format` \\| `(\\d+)` \\|$"},
		{"docs/storage-format.md .meta.json", doc, `"format":(\d+)\}`},
		{"docs/storage-format.md user_version", doc, "`PRAGMA user_version` is `(\\d+)`"},
		{"recorder/doc.go", pkg, `# On-disk format \(version (\d+)\)`},
	} {
		m := regexp.MustCompile(c.re).FindAllSubmatch(c.text, -1)
		if len(m) != 1 || string(m[0][1]) != v {
			t.Errorf("%s states format %q, want exactly one statement of %s", c.where, m, v)
		}
	}
	if schemaVersion != FormatVersion {
		t.Errorf("user_version %d, format %d: one format, numbered alike", schemaVersion, FormatVersion)
	}
}
