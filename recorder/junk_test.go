package recorder

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// junkArchives are hostile or corrupt archives of a cluster folder, each
// inflating to inflated bytes (scaled down from the 4.5 MB archives that
// inflated to 1 GiB each): gzip of zeros; a SQLite header declaring the
// whole size followed by zeros; the same declaring less than the cap (it
// inflates within the cap but is no database); a real database followed by
// zeros.
var junkArchives = []string{"zeros", "header", "header-small", "trailing"}

// writeJunkArchive writes the junk archive kind at path. small is the size
// of "header-small", inflated that of the others.
func writeJunkArchive(t testing.TB, path, kind string, inflated, small int64) {
	t.Helper()
	var head []byte
	size := inflated
	switch kind {
	case "zeros":
	case "header", "header-small":
		if kind == "header-small" {
			size = small
		}
		head = sqliteHeader(t, size)
	case "trailing":
		tmp := filepath.Join(t.TempDir(), "a.db")
		writeDB(t, tmp, "junk")
		var err error
		if head, err = os.ReadFile(tmp); err != nil {
			t.Fatal(err)
		}
	default:
		t.Fatalf("unknown junk archive %q", kind)
	}
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	zw.Write(head)
	if _, err := io.CopyN(zw, zeroReader{}, size-int64(len(head))); err != nil {
		t.Fatal(err)
	}
	zw.Close()
	os.MkdirAll(filepath.Dir(path), 0o700)
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
}

// sqliteHeader returns the 100-byte header of a real database, changed to
// declare size bytes (4 KiB pages).
func sqliteHeader(t testing.TB, size int64) []byte {
	t.Helper()
	tmp := filepath.Join(t.TempDir(), "h.db")
	writeDB(t, tmp, "junk")
	data, err := os.ReadFile(tmp)
	if err != nil {
		t.Fatal(err)
	}
	h := bytes.Clone(data[:100])
	binary.BigEndian.PutUint16(h[16:], 4096)
	binary.BigEndian.PutUint32(h[28:], uint32(size/4096))
	copy(h[92:96], h[24:28]) // version-valid-for = change counter: the size is valid
	return h
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// junkFolder writes a cluster folder c1 holding junkArchives, inflating to
// inflated bytes (small for header-small), and one valid archive with the
// event of task "t".
func junkFolder(t testing.TB, shared string, inflated, small int64) {
	t.Helper()
	c1 := filepath.Join(shared, "history", "c1")
	for i, kind := range junkArchives {
		writeJunkArchive(t, filepath.Join(c1, fmt.Sprintf("c1-%d.db.gz", int64(i)*3600000)), kind, inflated, small)
	}
	writeArchive(t, filepath.Join(c1, fmt.Sprintf("c1-%d.db.gz", int64(len(junkArchives))*3600000)), "t", 0)
}

// BenchmarkTraceJunkArchives measures a Trace of a cluster folder holding
// four junk archives of about 64 KiB that inflate to 64 MiB (one to 24
// MiB) and one valid archive, with the per-archive cap scaled to 32 MiB:
// first-ms is the first trace of a fresh recorder, ns/op the later ones.
func BenchmarkTraceJunkArchives(b *testing.B) {
	const inflated, small, capBytes = 64 << 20, 24 << 20, 32 << 20
	shared := b.TempDir()
	junkFolder(b, shared, inflated, small)
	r := mustOpen(b, baseConfig(b, b.TempDir(), shared, "w", newClock()))
	r.gz.maxFile = capBytes
	trace := func() {
		evs, err := r.Trace(context.Background(), "t")
		if err != nil || len(evs) != 1 {
			b.Fatalf("Trace() = %v, %v; want the valid archive's event", evs, err)
		}
	}
	start := time.Now()
	trace()
	first := time.Since(start)
	inflations := r.Stats().ArchiveInflations
	for b.Loop() {
		trace()
	}
	b.ReportMetric(float64(first.Microseconds())/1000, "first-ms")
	b.ReportMetric(float64(r.Stats().ArchiveInflations-inflations)/float64(b.N), "inflations/op")
}

// TestTraceJunkArchiveInflatedOnce: junk archives in a cluster folder cost
// one inflation each, however many traces follow: each is refused once,
// logged once as recorder_archive_refused naming the file (never its
// content) and remembered by path, size and mtime, while the valid archive
// keeps answering. A junk archive replaced by a valid one is read again.
func TestTraceJunkArchiveInflatedOnce(t *testing.T) {
	t.Parallel()
	const inflated, small, capBytes = 8 << 20, 3 << 20, 4 << 20
	shared := t.TempDir()
	junkFolder(t, shared, inflated, small)
	logs := &logRecords{}
	cfg := baseConfig(t, t.TempDir(), shared, "w", newClock())
	cfg.Logger = slog.New(logs)
	r := mustOpen(t, cfg)
	r.gz.maxFile = capBytes

	want := int64(len(junkArchives) + 1) // each junk archive once, the valid one once
	for i := range 5 {
		evs, err := r.Trace(t.Context(), "t")
		if err != nil || len(evs) != 1 {
			t.Fatalf("trace %d: Trace() = %v, %v; want the valid archive's event", i+1, evs, err)
		}
		if n := int64(r.Stats().ArchiveInflations); n != want {
			t.Fatalf("after trace %d: %d archive inflations, want %d (each archive at most once)", i+1, n, want)
		}
	}
	refused := logs.named("recorder_archive_refused")
	files := map[string]bool{}
	for _, rec := range refused {
		files[rec["file"].String()] = true
		for k, v := range rec {
			if s := v.String(); len(s) > 300 || strings.Contains(s, "SQLite format") {
				t.Errorf("recorder_archive_refused %s = %q: want no archive content", k, s)
			}
		}
	}
	if len(refused) != len(junkArchives) || len(files) != len(junkArchives) {
		t.Errorf("recorder_archive_refused logged %d times for %d files (%v), want once per junk archive (%d)",
			len(refused), len(files), files, len(junkArchives))
	}
	if n := len(cacheFiles(t, r)); n != 1 {
		t.Errorf("cache folder holds %d copies, want 1 (the valid archive's)", n)
	}

	// A refused archive replaced by a valid one (new size and mtime) is
	// read again.
	replaced := filepath.Join(shared, "history", "c1", "c1-0.db.gz")
	writeArchive(t, replaced, "u", 0)
	evs, err := r.Trace(t.Context(), "u")
	if err != nil || len(evs) != 1 {
		t.Fatalf("Trace(u) = %v, %v; want the replaced archive's event", evs, err)
	}
	if n := int64(r.Stats().ArchiveInflations); n != want+1 {
		t.Errorf("%d archive inflations after the replacement, want %d", n, want+1)
	}
}

// TestTraceJunkArchivesConcurrent: traces running at once share one
// inflation of each archive and one refusal of each junk one.
func TestTraceJunkArchivesConcurrent(t *testing.T) {
	t.Parallel()
	shared := t.TempDir()
	junkFolder(t, shared, 8<<20, 3<<20)
	logs := &logRecords{}
	cfg := baseConfig(t, t.TempDir(), shared, "w", newClock())
	cfg.Logger = slog.New(logs)
	r := mustOpen(t, cfg)
	r.gz.maxFile = 4 << 20
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			if evs, err := r.Trace(t.Context(), "t"); err != nil || len(evs) != 1 {
				t.Errorf("Trace() = %v, %v; want the valid archive's event", evs, err)
			}
		})
	}
	wg.Wait()
	s := r.Stats()
	if s.ArchiveInflations != uint64(len(junkArchives)+1) || s.ArchivesRefused != uint64(len(junkArchives)) {
		t.Errorf("%d inflations, %d refusals; want %d and %d", s.ArchiveInflations, s.ArchivesRefused, len(junkArchives)+1, len(junkArchives))
	}
	if n := len(logs.named("recorder_archive_refused")); n != len(junkArchives) {
		t.Errorf("recorder_archive_refused logged %d times, want %d", n, len(junkArchives))
	}
}

// TestArchiveRefusalsBounded: the refused archives remembered stay within
// their bound; one forgotten is refused again when met (one inflation
// more), and one removed from the folder is forgotten.
func TestArchiveRefusalsBounded(t *testing.T) {
	t.Parallel()
	shared := t.TempDir()
	junkFolder(t, shared, 8<<20, 3<<20)
	r := mustOpen(t, baseConfig(t, t.TempDir(), shared, "w", newClock()))
	r.gz.maxFile = 4 << 20
	r.gz.maxRefused = 2
	refused := func() int {
		r.gz.mu.Lock()
		defer r.gz.mu.Unlock()
		return len(r.gz.refused)
	}
	for range 2 {
		if evs, err := r.Trace(t.Context(), "t"); err != nil || len(evs) != 1 {
			t.Fatalf("Trace() = %v, %v; want the valid archive's event", evs, err)
		}
		if n := refused(); n != 2 {
			t.Errorf("%d refusals remembered, want the bound, 2", n)
		}
	}
	if n := r.Stats().ArchivesRefused; n <= uint64(len(junkArchives)) {
		t.Errorf("%d refusals over two traces, want more than %d (forgotten ones are refused again)", n, len(junkArchives))
	}
	for i := range junkArchives {
		os.Remove(filepath.Join(shared, "history", "c1", fmt.Sprintf("c1-%d.db.gz", int64(i)*3600000)))
	}
	if _, err := r.Trace(t.Context(), "t"); err != nil {
		t.Fatal(err)
	}
	if n := refused(); n != 0 {
		t.Errorf("%d refusals remembered after their archives were removed, want 0", n)
	}
}
