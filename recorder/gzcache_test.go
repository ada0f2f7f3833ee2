package recorder

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeArchive writes a gzip of a database holding one event of taskID,
// and pad bytes of zeros in a table of their own (they make the database
// larger, and inflate, but no query reads them), at path.
func writeArchive(t testing.TB, path, taskID string, pad int) {
	t.Helper()
	tmp := filepath.Join(t.TempDir(), "a.db")
	writeDB(t, tmp, taskID)
	if pad > 0 {
		db, err := openBuildDB(context.Background(), tmp)
		if err != nil {
			t.Fatal(err)
		}
		err = execSQL(db, `CREATE TABLE pad(b BLOB)`)
		if err == nil {
			err = execSQL(db, `INSERT INTO pad VALUES(zeroblob(?))`, pad)
		}
		if cerr := db.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	data, err := os.ReadFile(tmp)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(data)
	zw.Close()
	os.MkdirAll(filepath.Dir(path), 0o700)
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
}

// cacheFiles lists the decompressed copies on disk.
func cacheFiles(t testing.TB, r *Recorder) []string {
	t.Helper()
	r.gz.mu.Lock()
	dir := r.gz.dir
	r.gz.mu.Unlock()
	if dir == "" {
		return nil
	}
	got, _ := filepath.Glob(filepath.Join(dir, "*"))
	return got
}

// TestTraceArchiveInflateCap: an archive that inflates beyond the cap is
// refused with a clear log naming the cap (recorder_archive_refused),
// nothing of it stays on disk, and the rest of the history is still
// traced.
func TestTraceArchiveInflateCap(t *testing.T) {
	t.Parallel()
	shared := t.TempDir()
	writeDB(t, filepath.Join(shared, "history", "c1", "w-1-2.db"), "t")
	writeArchive(t, filepath.Join(shared, "history", "c1", "c1-0.db.gz"), "t", 3<<20) // a zip bomb in small
	logs := &logRecords{}
	cfg := baseConfig(t, t.TempDir(), shared, "w", newClock())
	cfg.Logger = slog.New(logs)
	r := mustOpen(t, cfg)
	r.gz.maxFile = 1 << 20

	evs, err := r.Trace(t.Context(), "t")
	if err != nil || len(evs) != 1 {
		t.Fatalf("Trace() = %v, %v; want the sealed file's event despite the oversized archive", evs, err)
	}
	warn := logs.named("recorder_archive_refused")
	if len(warn) != 1 || !strings.Contains(warn[0]["reason"].String(), "beyond its size cap") ||
		warn[0]["file"].String() != "history/c1/c1-0.db.gz" {
		t.Errorf("refusals = %v, want one naming the archive and the size cap", warn)
	}
	if files := cacheFiles(t, r); len(files) != 0 {
		t.Errorf("cache folder holds %v after a refused archive, want nothing", files)
	}
	var buf bytes.Buffer
	f, _ := os.Open(filepath.Join(shared, "history", "c1", "c1-0.db.gz"))
	defer f.Close()
	if n, err := inflateTo(t.Context(), &buf, f, 1<<20); !errors.Is(err, ErrArchiveTooLarge) || n > 1<<20+1 {
		t.Errorf("inflateTo() = %d, %v; want ErrArchiveTooLarge after at most the cap", n, err)
	}
}

// TestArchiveCacheEviction: a cached copy is removed once its archive is
// gone, and the copies together stay under the total bound.
func TestArchiveCacheEviction(t *testing.T) {
	t.Parallel()
	shared := t.TempDir()
	c1 := filepath.Join(shared, "history", "c1")
	for _, ws := range []string{"0", "3600000", "7200000"} {
		writeArchive(t, filepath.Join(c1, "c1-"+ws+".db.gz"), "t", 200<<10)
	}
	r := mustOpen(t, baseConfig(t, t.TempDir(), shared, "w", newClock()))
	r.gz.maxTotal = 600 << 10 // room for two copies, not three

	evs, err := r.Trace(t.Context(), "t")
	if err != nil || len(evs) != 1 { // three identical events, de-duplicated
		t.Fatalf("Trace() = %v, %v", evs, err)
	}
	n, total := r.gz.cached()
	if total > r.gz.maxTotal || n != 2 || len(cacheFiles(t, r)) != 2 {
		t.Errorf("cache holds %d copies, %d bytes (%d files); want 2 within %d bytes", n, total, len(cacheFiles(t, r)), r.gz.maxTotal)
	}

	for _, ws := range []string{"0", "3600000", "7200000"} {
		os.Remove(filepath.Join(c1, "c1-"+ws+".db.gz"))
	}
	r.pruneCache(context.Background())
	if n, _ := r.gz.cached(); n != 0 || len(cacheFiles(t, r)) != 0 {
		t.Errorf("cache holds %d copies (%v) after their archives were removed, want none", n, cacheFiles(t, r))
	}
}
