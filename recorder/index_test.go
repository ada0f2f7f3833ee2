package recorder

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"svc/worker/event"
)

// indexedFolder folds one sealed file of tasks "a-0".."a-9" (labels
// batch=a, region, customer) into an archive part of a new shared folder
// and returns a recorder on it, with the part's path.
func indexedFolder(t *testing.T) (*Recorder, string) {
	t.Helper()
	shared := t.TempDir()
	sealedInto(t, shared, "a", time.UnixMilli(t0), 10)
	clk := newClock()
	clk.add(3 * time.Hour)
	cfg := baseConfig(t, "", shared, "holder", clk)
	cfg.ArchiveEnabled = true
	r := mustOpen(t, cfg)
	if err := r.archivePass(t.Context()); err != nil {
		t.Fatal(err)
	}
	parts, _ := filepath.Glob(filepath.Join(shared, "history", "c1", "*.db.gz"))
	if len(parts) != 1 || !fileExists(parts[0]+".idx") {
		t.Fatalf("archives %v, want one with its .idx", parts)
	}
	checkMode(t, parts[0]+".idx", 0o600)
	return r, parts[0]
}

// TestArchiveIndexSkips: a trace or a label search for what an archive
// does not hold never inflates it; what it holds is found.
func TestArchiveIndexSkips(t *testing.T) {
	t.Parallel()
	r, _ := indexedFolder(t)
	for _, id := range []string{"b-1", "a-10", "", "a"} {
		if evs, err := r.Trace(t.Context(), id); err != nil || len(evs) != 0 {
			t.Errorf("Trace(%q) = %d events, %v; want none", id, len(evs), err)
		}
	}
	for _, l := range [][2]string{{"batch", "b"}, {"nolabel", "a"}, {"region", "mars"}} {
		if rows, err := r.TraceByLabel(t.Context(), l[0], l[1], 10); err != nil || len(rows) != 0 {
			t.Errorf("TraceByLabel(%s=%s) = %d rows, %v; want none", l[0], l[1], len(rows), err)
		}
	}
	if rows, err := r.TraceByLabelName(t.Context(), "nolabel", 10); err != nil || len(rows) != 0 {
		t.Errorf("TraceByLabelName(nolabel) = %d rows, %v; want none", len(rows), err)
	}
	if n := r.Stats().ArchiveInflations; n != 0 {
		t.Fatalf("%d archive inflations for lookups the index rules out, want 0", n)
	}
	if evs, err := r.Trace(t.Context(), "a-7"); err != nil || len(evs) != 4 {
		t.Errorf("Trace(a-7) = %d events, %v; want its 4", len(evs), err)
	}
	if rows, err := r.TraceByLabel(t.Context(), "batch", "a", 100); err != nil || len(rows) != 10 {
		t.Errorf("TraceByLabel(batch=a) = %d rows, %v; want 10", len(rows), err)
	}
	if rows, err := r.TraceByLabelName(t.Context(), "region", 100); err != nil || len(rows) != 10 {
		t.Errorf("TraceByLabelName(region) = %d rows, %v; want 10", len(rows), err)
	}
	if n := r.Stats().ArchiveInflations; n != 1 {
		t.Errorf("%d archive inflations, want 1 (the cache keeps the copy)", n)
	}
}

// TestArchiveIndexNotTrusted: an index that does not describe its archive
// (the archive was replaced by another implementation, the index is junk,
// truncated or missing) is ignored: the archive is searched.
func TestArchiveIndexNotTrusted(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		spoil func(t *testing.T, part string)
	}{
		{"archive replaced", func(t *testing.T, part string) {
			os.Remove(part)
			writeArchive(t, part, "b-1", 0)
		}},
		{"junk index", func(t *testing.T, part string) { os.WriteFile(part+".idx", []byte("SVCIDX1\njunk"), 0o600) }},
		{"truncated index", func(t *testing.T, part string) {
			data, _ := os.ReadFile(part + ".idx")
			os.WriteFile(part+".idx", data[:len(data)-1], 0o600)
		}},
		{"no index", func(t *testing.T, part string) { os.Remove(part + ".idx") }},
		{"index of another archive", func(t *testing.T, part string) {
			r2, other := indexedFolder(t)
			r2.Close()
			data, _ := os.ReadFile(other + ".idx")
			os.WriteFile(part+".idx", data, 0o600)
			os.Remove(part)
			writeArchive(t, part, "b-1", 0)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, part := indexedFolder(t)
			data, _ := os.ReadFile(part)
			tc.spoil(t, part)
			want := "a-3"
			if now, _ := os.ReadFile(part); string(now) != string(data) {
				want = "b-1" // the archive itself was replaced
			}
			if evs, err := r.Trace(t.Context(), want); err != nil || len(evs) == 0 {
				t.Errorf("Trace(%s) = %d events, %v; want the archive searched", want, len(evs), err)
			}
		})
	}
}

// TestTraceByLabelStopsAtLimit: rows newer than every archive fill the
// limit, so no archive is inflated; a larger limit reaches into them.
func TestTraceByLabelStopsAtLimit(t *testing.T) {
	t.Parallel()
	_, part := indexedFolder(t) // archive: batch=a at t0
	clk := newClock()
	clk.add(4 * time.Hour)
	shared := filepath.Dir(filepath.Dir(filepath.Dir(part)))
	cfg := baseConfig(t, t.TempDir(), shared, "w", clk)
	w := mustOpen(t, cfg)
	startRun(t, w)
	for i := range 5 {
		clk.tick()
		w.Task(event.TaskRow{TaskID: "live-" + itoa(i), Status: "ok", Labels: map[string]string{"batch": "a"}})
	}
	waitWritten(t, w, 0, 5)
	rows, err := w.TraceByLabel(t.Context(), "batch", "a", 5)
	if err != nil || len(rows) != 5 || rows[0].TaskID != "live-4" || rows[4].TaskID != "live-0" {
		t.Fatalf("TraceByLabel(batch=a, 5) = %v, %v; want the 5 live rows, newest first", rows, err)
	}
	if n := w.Stats().ArchiveInflations; n != 0 {
		t.Errorf("%d archive inflations with the limit met by newer rows, want 0", n)
	}
	if rows, err := w.TraceByLabel(t.Context(), "batch", "a", 100); err != nil || len(rows) != 15 {
		t.Errorf("TraceByLabel(batch=a, 100) = %d rows, %v; want 15", len(rows), err)
	}
}

// FuzzArchiveIndex: an .idx comes from the shared folder, so any content
// is read without panicking or reading beyond its bounds (like rows, an
// index a peer forges can hide what the archive holds: the folder's writers
// are trusted); the genuine index never rules a held task out.
func FuzzArchiveIndex(f *testing.F) {
	shared := f.TempDir()
	sealedInto(f, shared, "a", time.UnixMilli(t0), 10)
	clk := newClock()
	clk.add(3 * time.Hour)
	cfg := baseConfig(f, "", shared, "holder", clk)
	cfg.ArchiveEnabled = true
	r := mustOpen(f, cfg)
	if err := r.archivePass(f.Context()); err != nil {
		f.Fatal(err)
	}
	parts, _ := filepath.Glob(filepath.Join(shared, "history", "c1", "*.db.gz"))
	genuine, err := os.ReadFile(parts[0] + ".idx")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(genuine)
	f.Add(genuine[:idxHeader])
	f.Add([]byte(idxMagic))
	hist := r.openHist()
	defer hist.close()
	files, err := listIn(hist.d, r.histSegs(), true)
	if err != nil || len(files) != 1 {
		f.Fatalf("listIn = %v, %v", files, err)
	}
	f.Fuzz(func(t *testing.T, idx []byte) {
		if err := os.WriteFile(parts[0]+".idx", idx, 0o600); err != nil {
			t.Fatal(err)
		}
		if held := hist.mayHold(files[0], taskKey("a-3")); !held && string(idx) == string(genuine) {
			t.Fatalf("the genuine index ruled out a task the archive holds")
		}
		hist.mayHold(files[0], taskKey("b-1"), labelKey("batch", "b"), labelNameKey("x"))
	})
}
