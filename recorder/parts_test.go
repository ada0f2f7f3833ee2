package recorder

import (
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// partNames lists the archives of history/c1, sorted.
func partNames(t testing.TB, shared string) []string {
	t.Helper()
	got, _ := filepath.Glob(filepath.Join(shared, "history", "c1", "*.db.gz"))
	for i := range got {
		got[i] = filepath.Base(got[i])
	}
	slices.Sort(got)
	return got
}

// readArchiveMeta reads an archive's .meta.json.
func readArchiveMeta(t testing.TB, shared, name string) fileMeta {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(shared, "history", "c1", name+".meta.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m fileMeta
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestArchiveParts: a window's sealed files are folded into parts of a
// bounded size, so no trace ever inflates (and no pass ever rewrites) more
// than one part; a later sealed file extends the newest part while it has
// room; every task stays traceable.
func TestArchiveParts(t *testing.T) {
	t.Parallel()
	clk := newClock()
	shared := t.TempDir()
	ws := int64(t0 - 1000)
	var froms []int64
	var size int64
	for i := range 5 {
		from := ws + 1000 + int64(i)*60000
		size = writeHist(t, shared, "sealed", ws, from, from+30000, 100<<10)
		froms = append(froms, from)
	}
	clk.add(3 * time.Hour)
	cfg := baseConfig(t, "", shared, "holder", clk)
	cfg.ArchiveEnabled = true
	r := mustOpen(t, cfg)
	r.partBytes = 2*size + size/2 // two sealed files a part
	if err := r.archivePass(t.Context()); err != nil {
		t.Fatal(err)
	}
	want := []string{"c1-" + itoa(int(ws)) + "-1.db.gz", "c1-" + itoa(int(ws)) + "-2.db.gz", "c1-" + itoa(int(ws)) + ".db.gz"}
	if got := partNames(t, shared); !slices.Equal(got, want) {
		t.Fatalf("archives = %v, want %v", got, want)
	}
	for _, name := range want {
		if m := readArchiveMeta(t, shared, name); m.InflatedBytes <= 0 || m.InflatedBytes > r.partBytes || len(m.Sources) == 0 {
			t.Errorf("%s meta = %+v, want inflated_bytes within %d and its sources", name, m, r.partBytes)
		}
	}
	if m := readArchiveMeta(t, shared, want[2]); m.FromMs != froms[0] || m.ToMs != froms[1]+30000 || len(m.Sources) != 2 {
		t.Errorf("first part meta = %+v, want the two oldest files", m)
	}

	// A small sealed file later: the newest part (one file so far) takes it.
	from := ws + 10*60000
	writeHist(t, shared, "sealed", ws, from, from+1000, 1<<10)
	froms = append(froms, from)
	if err := r.archivePass(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := partNames(t, shared); !slices.Equal(got, want) {
		t.Errorf("after a small file: archives = %v, want %v (the newest part extended)", got, want)
	}
	if m := readArchiveMeta(t, shared, want[1]); len(m.Sources) != 2 || m.ToMs != from+1000 {
		t.Errorf("extended part meta = %+v, want two sources ending at %d", m, from+1000)
	}
	for _, from := range froms {
		if !traced(t, r, from) {
			t.Errorf("task t%d not traced after archiving", from)
		}
	}
	if k := kinds(t, r); k["sealed"] != 0 || k["archive"] != 3 {
		t.Errorf("Databases() kinds = %v, want 3 archives", k)
	}
}

// TestArchivePartNotExtended: an archive written before parts (no
// inflated_bytes in its meta) is never rewritten, and an unreadable part
// is left alone with a warning: new sealed files start a part of their own.
func TestArchivePartNotExtended(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		prep func(t *testing.T, shared string, ws int64)
		warn int
	}{
		{"legacy archive", func(t *testing.T, shared string, ws int64) {
			writeHist(t, shared, "archive", ws, ws+1, ws+2, 1<<10)
		}, 0},
		{"unreadable part", func(t *testing.T, shared string, ws int64) {
			c1 := filepath.Join(shared, "history", "c1")
			os.MkdirAll(c1, 0o700)
			name := "c1-" + itoa(int(ws)) + ".db.gz"
			os.WriteFile(filepath.Join(c1, name), []byte("not gzip"), 0o600)
			meta, _ := json.Marshal(fileMeta{Kind: "archive", Cluster: "c1", FromMs: ws + 1, ToMs: ws + 2, Format: 1, InflatedBytes: 1000})
			os.WriteFile(filepath.Join(c1, name+".meta.json"), meta, 0o600)
		}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := newClock()
			shared := t.TempDir()
			ws := int64(t0 - 1000)
			tc.prep(t, shared, ws)
			before, _ := os.ReadFile(filepath.Join(shared, "history", "c1", "c1-"+itoa(int(ws))+".db.gz"))
			writeHist(t, shared, "sealed", ws, ws+5000, ws+6000, 1<<10)
			clk.add(3 * time.Hour)
			logs := &logRecords{}
			cfg := baseConfig(t, "", shared, "holder", clk)
			cfg.ArchiveEnabled, cfg.Logger = true, slog.New(logs)
			r := mustOpen(t, cfg)
			if err := r.archivePass(t.Context()); err != nil {
				t.Fatal(err)
			}
			want := []string{"c1-" + itoa(int(ws)) + "-1.db.gz", "c1-" + itoa(int(ws)) + ".db.gz"}
			if got := partNames(t, shared); !slices.Equal(got, want) {
				t.Errorf("archives = %v, want %v", got, want)
			}
			after, _ := os.ReadFile(filepath.Join(shared, "history", "c1", want[1]))
			if string(after) != string(before) {
				t.Errorf("the first archive was rewritten")
			}
			if !traced(t, r, ws+5000) {
				t.Errorf("the sealed file's task is not traced")
			}
			if got := logs.named("recorder_archive_part_skipped"); len(got) != tc.warn {
				t.Errorf("recorder_archive_part_skipped logged %d times, want %d", len(got), tc.warn)
			}
		})
	}
}

// TestPacerRests: a paced job at half a core sleeps at least as long as it
// worked.
func TestPacerRests(t *testing.T) {
	t.Parallel()
	p := newPacer(0.5)
	for start := time.Now(); time.Since(start) < 30*time.Millisecond; {
	}
	start := time.Now()
	p.rest(t.Context())
	if slept := time.Since(start); slept < 30*time.Millisecond {
		t.Errorf("rest() slept %s after 30ms of work, want at least as long", slept)
	}
}
