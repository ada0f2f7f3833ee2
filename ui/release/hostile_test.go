package release

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Each hostile archive is refused with a clear error and leaves nothing in
// the cache: no tag directory, no temporary files.
func TestFetchRefusesHostileArchives(t *testing.T) {
	t.Parallel()
	const tag = "v6.6.6"
	many := make([]entry, MaxArchiveEntries+1)
	for i := range many {
		many[i] = entry{name: fmt.Sprintf("assets/f%04d", i), body: []byte("x")}
	}
	valid := buildArchive(t, bundleEntries(tag))
	cases := []struct {
		name    string
		archive []byte
		sum     []byte // nil = the archive's own sha256
		want    string
	}{
		{name: "checksum mismatch", archive: valid, sum: sumLine([]byte("something else"), ArchiveName(tag)), want: "checksum mismatch"},
		{name: "dot-dot traversal", archive: buildArchive(t, bundleEntries(tag, entry{name: "../escape", body: []byte("x")})), want: `"../escape": path traversal`},
		{name: "nested traversal", archive: buildArchive(t, bundleEntries(tag, entry{name: "assets/../../escape", body: []byte("x")})), want: "path traversal"},
		{name: "absolute path", archive: buildArchive(t, bundleEntries(tag, entry{name: "/tmp/escape", body: []byte("x")})), want: `"/tmp/escape": absolute path`},
		{name: "symlink", archive: buildArchive(t, bundleEntries(tag, entry{name: "assets/passwd", typ: tar.TypeSymlink, linkname: "/etc/passwd"})), want: "links are not allowed"},
		{name: "hard link", archive: buildArchive(t, bundleEntries(tag, entry{name: "assets/copy", typ: tar.TypeLink, linkname: "index.html"})), want: "links are not allowed"},
		{name: "character device", archive: buildArchive(t, bundleEntries(tag, entry{name: "assets/null", typ: tar.TypeChar})), want: "device files"},
		{name: "block device", archive: buildArchive(t, bundleEntries(tag, entry{name: "assets/sda", typ: tar.TypeBlock})), want: "device files"},
		{name: "fifo", archive: buildArchive(t, bundleEntries(tag, entry{name: "assets/pipe", typ: tar.TypeFifo})), want: "FIFOs"},
		{name: "too many entries", archive: buildArchive(t, bundleEntries(tag, many...)), want: "more than 2000 entries"},
		{name: "too large unpacked", archive: buildArchive(t, bundleEntries(tag, entry{name: "assets/big", size: MaxUnpackedBytes + 1})), want: "more than 50 MiB unpacked"},
		{name: "large in sum", archive: buildArchive(t, bundleEntries(tag, entry{name: "assets/a", size: 30 << 20}, entry{name: "assets/b", size: 30 << 20})), want: "more than 50 MiB unpacked"},
		{name: "truncated gzip", archive: valid[:len(valid)-10], want: "truncated or corrupt archive"},
		{name: "truncated mid-tar", archive: valid[:len(valid)/2], want: "truncated or corrupt archive"},
		{name: "not gzip", archive: []byte("PK\x03\x04 a zip file"), want: "not a gzip stream"},
		{name: "directories implied by a file path", archive: deepPathArchive(t, tag, MaxArchiveDirs+1), want: "more than 256 directories"},
		{name: "explicit directories", archive: buildArchive(t, bundleEntries(tag, explicitDirs(MaxArchiveDirs)...)), want: "more than 256 directories"},
		{name: "duplicate entry", archive: buildArchive(t, bundleEntries(tag, entry{name: "index.html", body: []byte("again")})), want: "appears twice"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := newMirror(t)
			name := ArchiveName(tag)
			m.put("/releases/"+tag+"/"+name, tc.archive)
			sum := tc.sum
			if sum == nil {
				sum = sumLine(tc.archive, name)
			}
			m.put("/releases/"+tag+"/"+name+".sha256", sum)
			parent := t.TempDir()
			cache := filepath.Join(parent, "cache")
			_, err := Fetch(t.Context(), FetchOptions{Repo: m.repo(), Tag: tag, CacheDir: cache})
			if !errors.Is(err, ErrUnsafeArchive) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Fetch = %v, want ErrUnsafeArchive containing %q", err, tc.want)
			}
			assertEmptyCache(t, cache)
			if _, err := os.Stat(filepath.Join(parent, "escape")); err == nil {
				t.Errorf("an entry escaped the cache")
			}
		})
	}
}

// A valid archive with directories, "./" prefixes and nested assets unpacks.
func TestUnpackAcceptsOrdinaryShapes(t *testing.T) {
	t.Parallel()
	archive := buildArchive(t, []entry{
		{name: "./", typ: tar.TypeDir},
		{name: "./index.html", body: []byte("shell")},
		{name: "404.html", body: []byte("nf")},
		{name: "VERSION", body: []byte("v1.1.1\n")},
		{name: "assets/", typ: tar.TypeDir},
		{name: "assets/icons/a.svg", body: []byte("<svg/>")},
	})
	dir := t.TempDir()
	if err := unpackArchive(bytes.NewReader(archive), dir); err != nil {
		t.Fatalf("unpackArchive: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "assets", "icons", "a.svg")); string(b) != "<svg/>" {
		t.Errorf("nested asset = %q", b)
	}
	if err := checkBundleDir(dir, "v1.1.1"); err != nil {
		t.Errorf("checkBundleDir = %v", err)
	}
}

func FuzzUnpackArchive(f *testing.F) {
	f.Add(buildArchive(f, bundleEntries("v1.0.0")))
	f.Add(buildArchive(f, []entry{{name: "../x", body: []byte("x")}}))
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		if err := unpackArchive(bytes.NewReader(data), dir); err != nil {
			return
		}
		// Whatever unpacked stays inside dir and is plain files and dirs.
		filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.Type()&^os.ModeDir != 0 {
				t.Fatalf("unpacked %s of type %v", p, d.Type())
			}
			return nil
		})
	})
}

func FuzzLocalName(f *testing.F) {
	for _, s := range []string{"index.html", "./a/b", "../x", "/etc/passwd", "a/../../b", "a\\b", "."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		name, err := localName(raw)
		if err != nil || name == "." {
			return
		}
		if !filepath.IsLocal(name) || strings.Contains(name, "..") && strings.Contains("/"+name+"/", "/../") {
			t.Fatalf("localName(%q) = %q, which is not local", raw, name)
		}
		joined := filepath.Join("/cache/tmp", name)
		if !strings.HasPrefix(joined, "/cache/tmp/") {
			t.Fatalf("localName(%q) = %q escapes to %s", raw, name, joined)
		}
	})
}
