package release

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// deepPathArchive is a valid bundle of tag plus one file whose path
// implies depth directories without a directory entry for any of them.
func deepPathArchive(t testing.TB, tag string, depth int) []byte {
	t.Helper()
	name := strings.Repeat("d/", depth) + "f"
	return buildArchive(t, bundleEntries(tag, entry{name: name, body: []byte("x")}))
}

// explicitDirs returns n directory entries, assets/d000/ and on.
func explicitDirs(n int) []entry {
	out := make([]entry, n)
	for i := range out {
		out[i] = entry{name: fmt.Sprintf("assets/d%03d/", i), typ: tar.TypeDir}
	}
	return out
}

// countDirs counts the directories below root.
func countDirs(t *testing.T, root string) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() && p != root {
			n++
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// Every directory an unpack creates counts, whether an entry names it or a
// file's path implies it, and each counts once; a refused archive never
// creates more than the limit.
func TestUnpackCountsEveryDirectory(t *testing.T) {
	t.Parallel()
	b := bounds{entries: 100, dirs: 3, unpacked: 1 << 20}
	file := func(name string) entry { return entry{name: name, body: []byte("x")} }
	dir := func(name string) entry { return entry{name: name, typ: tar.TypeDir} }
	cases := []struct {
		name     string
		entries  []entry
		wantDirs int // -1: refused
	}{
		{"implied, at the limit", []entry{file("a/b/c/f")}, 3},
		{"implied, one over", []entry{file("a/b/c/d/f")}, -1},
		{"explicit, one over", []entry{dir("a/"), dir("b/"), dir("c/"), dir("d/")}, -1},
		{"explicit and implied, one over", []entry{dir("a/"), dir("b/"), file("c/d/f")}, -1},
		{"shared parents count once", []entry{file("a/b/f1"), file("a/b/f2"), file("a/c/f3")}, 3},
		{"an entry for an implied directory counts once", []entry{file("a/b/f"), dir("a/"), dir("a/b/"), dir("c/")}, 3},
		{"the root is not a directory of the archive", []entry{dir("./"), file("./a/b/c/f")}, 3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			err := unpackWithin(bytes.NewReader(buildArchive(t, c.entries)), root, b)
			switch {
			case c.wantDirs < 0 && (!errors.Is(err, ErrUnsafeArchive) || !strings.Contains(err.Error(), "more than 3 directories")):
				t.Fatalf("unpackWithin = %v, want ErrUnsafeArchive with more than 3 directories", err)
			case c.wantDirs >= 0 && err != nil:
				t.Fatalf("unpackWithin = %v, want nil", err)
			}
			if n := countDirs(t, root); c.wantDirs >= 0 && n != c.wantDirs || n > b.dirs {
				t.Errorf("unpack created %d directories, want %d (limit %d)", n, c.wantDirs, b.dirs)
			}
		})
	}
}
