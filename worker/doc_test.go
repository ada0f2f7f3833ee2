package worker

import (
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// TestPackageMap: the map in doc.go names every package of the module
// (every folder holding a non-test .go file, bench/ and testdata/ aside),
// and every folder it names is such a package, so a newcomer's map of the
// tree is whole and current.
func TestPackageMap(t *testing.T) {
	t.Parallel()
	named := packageMap(t, "doc.go")
	if len(named) < 10 {
		t.Fatalf("found %d entries in doc.go's map, want the whole tree (is the map still a \"# Map\" section of tab-indented lines?)", len(named))
	}
	onDisk := packageDirs(t, "..")
	var missing, stale []string
	for dir := range onDisk {
		if !named[dir] {
			missing = append(missing, dir)
		}
	}
	for dir := range named {
		if !onDisk[dir] {
			stale = append(stale, dir)
		}
	}
	sort.Strings(missing)
	sort.Strings(stale)
	if len(missing) > 0 {
		t.Errorf("worker/doc.go's map does not name %d package(s); add a line for each:\n%s", len(missing), strings.Join(missing, "\n"))
	}
	if len(stale) > 0 {
		t.Errorf("worker/doc.go's map names %d folder(s) that hold no package; remove or move their lines:\n%s", len(stale), strings.Join(stale, "\n"))
	}
}

// packageMap returns the folders named by the "# Map" section of the
// package comment in file: each entry is a tab-indented comment line that
// starts with the folder (relative to the module root, with a trailing
// slash; "./" is the root); its continuation lines start with spaces.
func packageMap(t *testing.T, file string) map[string]bool {
	t.Helper()
	src, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(src), "\n// # Map\n")
	if !ok {
		t.Fatalf("%s has no \"# Map\" section", file)
	}
	section, _, _ = strings.Cut(section, "\n// # ")
	named := map[string]bool{}
	for _, line := range strings.Split(section, "\n") {
		entry, ok := strings.CutPrefix(line, "//\t")
		if !ok || entry == "" || entry[0] == ' ' {
			continue
		}
		dir, _, _ := strings.Cut(entry, " ")
		if !strings.HasSuffix(dir, "/") {
			t.Errorf("%s's map: entry %q does not start with a folder ending in /", file, entry)
			continue
		}
		if named[dir] {
			t.Errorf("%s's map names %s twice", file, dir)
		}
		named[dir] = true
	}
	return named
}

// packageDirs returns the folders under root that hold a non-test .go
// file, relative to root with a trailing slash ("./" for root itself),
// skipping bench/, testdata/ and hidden folders.
func packageDirs(t *testing.T, root string) map[string]bool {
	t.Helper()
	dirs := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != root && (name == "bench" || name == "testdata" || strings.HasPrefix(name, ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		dirs[filepath.ToSlash(rel)+"/"] = true
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return dirs
}
