package recorder

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"zombiezen.com/go/sqlite"

	"svc/worker/event"
)

// writeDB creates a finished database at path holding one event of taskID.
func writeDB(t testing.TB, path, taskID string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	db, err := openBuildDB(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := execSQL(db, `INSERT INTO events(ts_ms, type, task_id, worker) VALUES(?, 'task_received', ?, 'other')`, t0-5000, taskID); err != nil {
		t.Fatal(err)
	}
	if err := setMeta(db, "format", "1", "kind", "sealed"); err != nil {
		t.Fatal(err)
	}
}

// dirNames lists a folder's entries, sorted.
func dirNames(t testing.TB, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// TestSymlinkedMergedFolder: a merged/ that is a symlink to another folder
// neither gets that folder's .db files deleted by retention nor receives
// merge results.
func TestSymlinkedMergedFolder(t *testing.T) {
	t.Parallel()
	clk := newClock()
	shared, victim := t.TempDir(), t.TempDir()
	old := "merged-" + itoa(int(clk.now().Add(-30*24*time.Hour).UnixMilli())) + "-0123456789abcdef.db"
	for _, name := range []string{old, old + ".meta.json", "precious.db"} {
		os.WriteFile(filepath.Join(victim, name), []byte("x"), 0o600)
	}
	if err := os.Symlink(victim, filepath.Join(shared, "merged")); err != nil {
		t.Fatal(err)
	}
	fresh := "w-" + itoa(t0) + "-" + itoa(t0+1) + ".db" // not old enough to archive
	writeDB(t, filepath.Join(shared, "history", "c1", fresh), "t")
	before := dirNames(t, victim)

	cfg := baseConfig(t, t.TempDir(), shared, "w", clk)
	cfg.ArchiveEnabled = true
	r := mustOpen(t, cfg)
	if err := r.archivePass(t.Context()); !errors.Is(err, ErrUnsafePath) {
		t.Errorf("archivePass() error = %v, want ErrUnsafePath for the symlinked merged/", err)
	}
	if got := dirNames(t, victim); !slices.Equal(got, before) {
		t.Errorf("after retention the symlink target holds %v, want %v untouched", got, before)
	}
	res, err := r.Merge(t.Context(), []string{"history/c1/" + fresh})
	if !errors.Is(err, ErrUnsafePath) {
		t.Errorf("Merge() = %+v, %v; want ErrUnsafePath", res, err)
	}
	if got := dirNames(t, victim); !slices.Equal(got, before) {
		t.Errorf("after a merge the symlink target holds %v, want %v untouched", got, before)
	}
	for _, d := range mustDatabases(t, r) {
		if d.Kind == "merged" {
			t.Errorf("Databases() lists %s from the symlinked merged/", d.Path)
		}
	}
}

// TestHardLinkNotServed: a hard link to a file outside the shared folder is
// neither downloaded, merged, listed nor traced.
func TestHardLinkNotServed(t *testing.T) {
	t.Parallel()
	shared, outside := t.TempDir(), t.TempDir()
	secret := filepath.Join(outside, "secret.db")
	writeDB(t, secret, "secret-task")
	for _, p := range []string{"history/c1/w-1-2.db", "merged/merged-1-0123456789abcdef.db"} {
		abs := filepath.Join(shared, filepath.FromSlash(p))
		os.MkdirAll(filepath.Dir(abs), 0o700)
		if err := os.Link(secret, abs); err != nil {
			t.Skipf("cannot hard-link across these folders: %v", err)
		}
	}
	r := mustOpen(t, baseConfig(t, t.TempDir(), shared, "w", newClock()))
	for _, p := range []string{"history/c1/w-1-2.db", "merged/merged-1-0123456789abcdef.db"} {
		if f, _, err := r.OpenDownload(p); !errors.Is(err, ErrNotFound) {
			if f != nil {
				f.Close()
			}
			t.Errorf("OpenDownload(%s) error = %v, want ErrNotFound for a hard link", p, err)
		}
		if _, err := r.ResolveDownload(p); !errors.Is(err, ErrNotFound) {
			t.Errorf("ResolveDownload(%s) error = %v, want ErrNotFound", p, err)
		}
		if _, err := r.Merge(t.Context(), []string{p}); !errors.Is(err, ErrNotFound) {
			t.Errorf("Merge(%s) error = %v, want ErrNotFound", p, err)
		}
	}
	if dbs := mustDatabases(t, r); len(dbs) != 1 || dbs[0].Kind != "live" {
		t.Errorf("Databases() = %+v, want only the live file", dbs)
	}
	if evs, err := r.Trace(t.Context(), "secret-task"); err != nil || len(evs) != 0 {
		t.Errorf("Trace(secret-task) = %v, %v; want nothing from the hard-linked file", evs, err)
	}
}

// TestSymlinkedHistoryFolder: a history/<cluster> (or history) that is a
// symlink is refused by sealing, listing, tracing, downloading and
// archiving; the target folder is never written or deleted.
func TestSymlinkedHistoryFolder(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, link string }{
		{"cluster folder", "history/c1"},
		{"history folder", "history"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			clk := newClock()
			shared, elsewhere := t.TempDir(), t.TempDir()
			target := elsewhere
			if tc.link == "history" {
				target = filepath.Join(elsewhere, "c1")
			}
			os.MkdirAll(target, 0o700)
			writeDB(t, filepath.Join(target, "w-1-2.db"), "t-elsewhere")
			linkAt := filepath.Join(shared, filepath.FromSlash(tc.link))
			os.MkdirAll(filepath.Dir(linkAt), 0o700)
			if err := os.Symlink(elsewhere, linkAt); err != nil {
				t.Fatal(err)
			}
			before := dirNames(t, target)

			cfg := baseConfig(t, t.TempDir(), shared, "w", clk)
			cfg.ArchiveEnabled = true
			cfg.FullDetail = true // the event written at once, not after the summary hold
			r := mustOpen(t, cfg)
			startRun(t, r)
			r.Event(event.Event{Type: event.TypeTaskReceived, TaskID: "t-live"})
			waitWritten(t, r, 1, 0)
			clk.add(time.Minute)
			if err := r.sealNow(t.Context()); !errors.Is(err, ErrUnsafePath) {
				t.Errorf("seal error = %v, want ErrUnsafePath", err)
			}
			if evs, _ := r.Events(t.Context(), EventQuery{}); len(evs) != 1 {
				t.Errorf("Events() after a refused seal = %v, want the event still in the live file", evs)
			}
			if dbs := mustDatabases(t, r); len(dbs) != 1 || dbs[0].Kind != "live" {
				t.Errorf("Databases() = %+v, want only the live file", dbs)
			}
			if evs, err := r.Trace(t.Context(), "t-elsewhere"); err != nil || len(evs) != 0 {
				t.Errorf("Trace(t-elsewhere) = %v, %v; want nothing through the symlink", evs, err)
			}
			if _, err := r.ResolveDownload("history/c1/w-1-2.db"); !errors.Is(err, ErrNotFound) {
				t.Errorf("ResolveDownload() error = %v, want ErrNotFound", err)
			}
			clk.add(3 * time.Hour)
			if err := r.archivePass(t.Context()); err == nil {
				t.Errorf("archivePass() = nil, want the symlinked folder refused")
			}
			if got := dirNames(t, target); !slices.Equal(got, before) {
				t.Errorf("symlink target holds %v, want %v untouched", got, before)
			}
		})
	}
}

// TestVFSReadsTheCheckedFile: SQLite reads the file that was opened and
// checked, even when its name is swapped for another file afterwards.
func TestVFSReadsTheCheckedFile(t *testing.T) {
	t.Parallel()
	shared := t.TempDir()
	c1 := filepath.Join(shared, "history", "c1")
	writeDB(t, filepath.Join(c1, "w-1-2.db"), "checked")
	writeDB(t, filepath.Join(shared, "swap.db"), "swapped-in")
	r := mustOpen(t, baseConfig(t, "", shared, "w", newClock()))
	f, _, err := r.openSharedFile([]string{"history", "c1", "w-1-2.db"}, false)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := os.Rename(filepath.Join(shared, "swap.db"), filepath.Join(c1, "w-1-2.db")); err != nil {
		t.Fatal(err)
	}
	evs, err := queryOpen(t.Context(), r, f, func(db *sqlite.Conn) ([]event.Event, error) {
		return queryEvents(db, `SELECT id, ts_ms, type, kind, task_id, worker, labels, payload FROM events`)
	})
	if err != nil || len(evs) != 1 || evs[0].TaskID != "checked" {
		t.Errorf("query of the opened file = %v, %v; want the checked file's event", evs, err)
	}
}

func mustDatabases(t testing.TB, r *Recorder) []Database {
	t.Helper()
	dbs, err := r.Databases(context.Background())
	if err != nil {
		t.Fatalf("Databases() error = %v", err)
	}
	return dbs
}
