package recorder

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// pathFixture builds a shared root with every kind of file and trap:
//
//	shared/history/c1/w-1-2.db         sealed file (real SQLite)
//	shared/history/c1/c1-0.db.gz       archive
//	shared/history/c1/.hidden.db       hidden
//	shared/history/c1/link.db          symlink to w-1-2.db (inside the tree)
//	shared/history/c1/out.db           symlink to a file outside the root
//	shared/history/lnk -> c1           symlinked folder
//	shared/history/c1/dir.db/          a folder with a .db name
//	shared/merged/m.db                 merge result
//	shared/history/own/                storage.dir of the recorder (inside shared)
//	shared/history/own/cache.db        the worker's own file, shaped like history
//	outside/secret.db                  outside the root
func pathFixture(t testing.TB) (r *Recorder, shared string) {
	t.Helper()
	base := t.TempDir()
	shared = filepath.Join(base, "shared")
	c1 := filepath.Join(shared, "history", "c1")
	for _, d := range []string{c1, filepath.Join(shared, "merged"), filepath.Join(base, "outside"), filepath.Join(c1, "dir.db")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	db, err := openBuildDB(context.Background(), filepath.Join(c1, "w-1-2.db"))
	if err != nil {
		t.Fatal(err)
	}
	execSQL(db, `INSERT INTO events(ts_ms, type, task_id) VALUES(1, 'task_received', 't')`)
	db.Close()
	files := []string{filepath.Join(c1, "c1-0.db.gz"), filepath.Join(c1, ".hidden.db"),
		filepath.Join(shared, "merged", "m.db"), filepath.Join(base, "outside", "secret.db")}
	for _, f := range files {
		os.WriteFile(f, []byte("x"), 0o600)
	}
	os.Symlink(filepath.Join(c1, "w-1-2.db"), filepath.Join(c1, "link.db"))
	os.Symlink(filepath.Join(base, "outside", "secret.db"), filepath.Join(c1, "out.db"))
	os.Symlink("c1", filepath.Join(shared, "history", "lnk"))
	own := filepath.Join(shared, "history", "own")
	cfg := baseConfig(t, own, shared, "w", newClock())
	r = mustOpen(t, cfg)
	os.WriteFile(filepath.Join(own, "cache.db"), []byte("x"), 0o600)
	return r, shared
}

// downloadCase is a requested path and whether ResolveDownload accepts it.
type downloadCase struct {
	path string
	ok   bool
}

// downloadCases is the path-safety corpus (also the fuzz seed corpus).
func downloadCases() []downloadCase {
	return []downloadCase{
		{"history/c1/w-1-2.db", true},
		{"history/c1/c1-0.db.gz", true},
		{"merged/m.db", true},
		{"", false},
		{"/", false},
		{"history/c1/../c1/w-1-2.db", false},
		{"../shared/history/c1/w-1-2.db", false},
		{"history/c1/%2e%2e/c1/w-1-2.db", false},
		{"history%2fc1%2fw-1-2.db", false},
		{"%2e%2e/outside/secret.db", false},
		{"/history/c1/w-1-2.db", false},
		{"history\\c1\\w-1-2.db", false},
		{"history/c1\\w-1-2.db", false},
		{"history/c1/w-1-2.db\x00", false},
		{"history/c1/w-1-2.db\x00.gz", false},
		{"./history/c1/w-1-2.db", false},
		{"history/./c1/w-1-2.db", false},
		{"history//c1/w-1-2.db", false},
		{"history/c1/w-1-2.db/", false},
		{"history/c1/", false},
		{"history/c1/.hidden.db", false},
		{"history/c1/.archive.lock", false},
		{"history/c1/w-1-2.db.meta.json", false},
		{"history/c1/link.db", false},
		{"history/c1/out.db", false},
		{"history/lnk/w-1-2.db", false},
		{"history/c1/dir.db", false},
		{"history/c1/missing.db", false},
		{"history/own/cache.db", false},
		{"history/own/recorder/x.db", false},
		{"live/w", false},
		{"merged/../history/c1/w-1-2.db", false},
		{"merged/sub/m.db", false},
		{"merged/.db", false},
		{"merged/m.db.gz", false},
		{"history/c1/w-1-2.DB", false},
		{"other/c1/w-1-2.db", false},
		{"history/c1/sub/w-1-2.db", false},
		{"history/c1/w-1-2.db\n", false},
		{"history/c1/w-1-2.db ", false},
		{"history/c1/\xff.db", false},
	}
}

func TestResolveDownload(t *testing.T) {
	r, shared := pathFixture(t)
	realShared, _ := filepath.EvalSymlinks(shared)
	for _, tc := range downloadCases() {
		t.Run(strings.ReplaceAll(tc.path, "/", "|"), func(t *testing.T) {
			abs, err := r.ResolveDownload(tc.path)
			f, _, ferr := r.OpenDownload(tc.path)
			if ferr == nil {
				f.Close()
			}
			if !tc.ok {
				if !errors.Is(err, ErrNotFound) {
					t.Errorf("ResolveDownload(%q) = %q, %v; want ErrNotFound", tc.path, abs, err)
				}
				if !errors.Is(ferr, ErrNotFound) {
					t.Errorf("OpenDownload(%q) error = %v; want ErrNotFound", tc.path, ferr)
				}
				return
			}
			if ferr != nil {
				t.Errorf("OpenDownload(%q) error = %v", tc.path, ferr)
			}
			want := filepath.Join(realShared, filepath.FromSlash(tc.path))
			if err != nil || abs != want {
				t.Errorf("ResolveDownload(%q) = %q, %v; want %q", tc.path, abs, err, want)
			}
		})
	}
}

// TestResolveDownloadOwnDir: with storage.dir beside shared.dir, its files
// are unreachable; with storage.dir equal to the shared root, history works.
func TestResolveDownloadOwnDir(t *testing.T) {
	base := t.TempDir()
	storage := filepath.Join(base, "storage")
	r := mustOpen(t, baseConfig(t, storage, filepath.Join(base, "shared"), "w", newClock()))
	os.MkdirAll(filepath.Join(storage, "history", "c1"), 0o700)
	os.WriteFile(filepath.Join(storage, "history", "c1", "x.db"), []byte("x"), 0o600)
	for _, p := range []string{"../storage/history/c1/x.db", "history/c1/x.db", "history/../../storage/history/c1/x.db"} {
		if _, err := r.ResolveDownload(p); !errors.Is(err, ErrNotFound) {
			t.Errorf("ResolveDownload(%q) error = %v, want ErrNotFound", p, err)
		}
	}
	same := mustOpen(t, baseConfig(t, storage, "", "w2", newClock()))
	if _, err := same.ResolveDownload("history/c1/x.db"); err != nil {
		t.Errorf("ResolveDownload with storage.dir as shared root = %v, want ok", err)
	}
	if _, err := same.ResolveDownload("recorder/x.db"); !errors.Is(err, ErrNotFound) {
		t.Errorf("ResolveDownload(recorder/x.db) = %v, want ErrNotFound", err)
	}
}

func TestMergePathSafety(t *testing.T) {
	r, _ := pathFixture(t)
	tests := []struct {
		name  string
		paths []string
		want  error
	}{
		{"no paths", nil, ErrBadShape},
		{"archive", []string{"history/c1/c1-0.db.gz"}, ErrBadShape},
		{"dotdot", []string{"history/c1/../c1/w-1-2.db"}, ErrBadShape},
		{"encoded dotdot", []string{"history/c1/%2e%2e/w-1-2.db"}, ErrBadShape},
		{"absolute", []string{"/etc/passwd"}, ErrBadShape},
		{"backslash", []string{"history\\c1\\w-1-2.db"}, ErrBadShape},
		{"nul", []string{"history/c1/w-1-2.db\x00"}, ErrBadShape},
		{"dot segment", []string{"./history/c1/w-1-2.db"}, ErrBadShape},
		{"empty segment", []string{"history//c1/w-1-2.db"}, ErrBadShape},
		{"live marker", []string{"live/w"}, ErrBadShape},
		{"bad shape after good", []string{"history/c1/w-1-2.db", "x.db"}, ErrBadShape},
		{"bad shape after missing", []string{"history/c1/missing.db", "x.db"}, ErrBadShape},
		{"symlink inside", []string{"history/c1/link.db"}, ErrNotFound},
		{"symlink outside", []string{"history/c1/out.db"}, ErrNotFound},
		{"symlinked folder", []string{"history/lnk/w-1-2.db"}, ErrNotFound},
		{"own storage dir", []string{"history/own/cache.db"}, ErrNotFound},
		{"missing", []string{"history/c1/missing.db"}, ErrNotFound},
		{"ok", []string{"history/c1/w-1-2.db", "history/c1/w-1-2.db"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := r.Merge(t.Context(), tt.paths)
			if !errors.Is(err, tt.want) || (tt.want == nil && err != nil) {
				t.Fatalf("Merge(%q) = %+v, %v; want %v", tt.paths, res, err, tt.want)
			}
			if tt.want == nil && (res.Events != 1 || !strings.HasPrefix(res.Path, "merged/merged-")) {
				t.Errorf("Merge(%q) = %+v, want 1 event (duplicates merged once)", tt.paths, res)
			}
		})
	}
}

func FuzzResolveDownload(f *testing.F) {
	for _, tc := range downloadCases() {
		f.Add(tc.path)
	}
	r, shared := pathFixture(f)
	root, _ := filepath.EvalSymlinks(shared)
	f.Fuzz(func(t *testing.T, rel string) {
		abs, err := r.ResolveDownload(rel)
		if err != nil {
			if !errors.Is(err, ErrNotFound) {
				t.Fatalf("ResolveDownload(%q) error %v is not ErrNotFound", rel, err)
			}
			return
		}
		if !within(abs, root) || abs == root {
			t.Fatalf("ResolveDownload(%q) = %q, outside %q", rel, abs, root)
		}
		if got, _ := filepath.Rel(root, abs); filepath.ToSlash(got) != rel {
			t.Fatalf("ResolveDownload(%q) = %q, which is not the requested path", rel, abs)
		}
		if _, _, ok := parseShape(rel); !ok {
			t.Fatalf("ResolveDownload(%q) accepted a path of no allowed shape", rel)
		}
		if fi, err := os.Lstat(abs); err != nil || !fi.Mode().IsRegular() {
			t.Fatalf("ResolveDownload(%q) = %q, not a regular file", rel, abs)
		}
		if within(abs, r.ownDir) {
			t.Fatalf("ResolveDownload(%q) = %q, inside storage.dir", rel, abs)
		}
	})
}
