package recorder

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
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
