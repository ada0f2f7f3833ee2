package release

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"strconv"
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
	b := bounds{entries: 100, dirs: 3, unpacked: 1 << 20, inflated: 1 << 20}
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

// paxFloodMember is one gzip member holding a tar PAX extended header
// ('x') with one record of about size bytes, and nothing else. The tar
// reader skips any number of consecutive 'x' headers inside one Next call
// (up to 1 MiB each), so repeated members inflate the stream without an
// entry or a byte of file content; deflate shrinks each to a few hundred
// bytes, and concatenated gzip members read as one stream.
func paxFloodMember(t testing.TB, size int) []byte {
	t.Helper()
	const key = "comment"
	// A record is "<len> <key>=<value>\n", <len> counting its own digits.
	n := len(key) + size + 3
	for n != len(strconv.Itoa(n))+len(key)+size+3 {
		n = len(strconv.Itoa(n)) + len(key) + size + 3
	}
	record := strconv.Itoa(n) + " " + key + "=" + strings.Repeat("a", size) + "\n"

	var hdr [512]byte // a ustar header block, typeflag 'x'
	copy(hdr[0:], "PaxHeaders/flood")
	copy(hdr[100:], "0000644\x00")
	copy(hdr[108:], "0000000\x00")
	copy(hdr[116:], "0000000\x00")
	copy(hdr[124:], fmt.Sprintf("%011o\x00", len(record)))
	copy(hdr[136:], "00000000000\x00")
	hdr[156] = tar.TypeXHeader
	copy(hdr[257:], "ustar\x0000")
	copy(hdr[148:], "        ") // the checksum sums the block with its own field as spaces
	var sum int
	for _, b := range hdr {
		sum += int(b)
	}
	copy(hdr[148:], fmt.Sprintf("%06o\x00 ", sum))

	var member bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&member, gzip.BestCompression)
	zw.Write(hdr[:])
	zw.Write([]byte(record))
	zw.Write(make([]byte, (512-len(record)%512)%512))
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return member.Bytes()
}

// paxFloodArchive is a valid bundle of tag after n flood members of
// about size bytes each: within every limit on entries and content.
func paxFloodArchive(t testing.TB, tag string, n, size int) []byte {
	t.Helper()
	member := paxFloodMember(t, size)
	var out bytes.Buffer
	for range n {
		out.Write(member)
	}
	out.Write(buildArchive(t, bundleEntries(tag)))
	return out.Bytes()
}

// inflatedSize is how many bytes the gzip stream of archive holds.
func inflatedSize(t *testing.T, archive []byte) int64 {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(archive))
	if err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, zr)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// The inflated stream is bounded as a whole, headers and padding
// included: PAX headers, which add neither an entry nor content, once
// inflated a 3.3 MB archive to 3 GB. Scaled: 2 MiB of PAX headers under a
// 1 MiB bound.
func TestUnpackBoundsTheInflatedStream(t *testing.T) {
	t.Parallel()
	b := bounds{entries: 100, dirs: 10, unpacked: 1 << 20, inflated: 1 << 20}
	flood := paxFloodArchive(t, "v1.0.0", 32, 64<<10)
	if len(flood) > 32<<10 {
		t.Fatalf("the flood archive is %d bytes; it should compress to a few KB", len(flood))
	}
	err := unpackWithin(bytes.NewReader(flood), t.TempDir(), b)
	if !errors.Is(err, ErrUnsafeArchive) || !strings.Contains(err.Error(), "more than 1 MiB inflated") {
		t.Fatalf("unpackWithin(PAX flood) = %v, want ErrUnsafeArchive with more than 1 MiB inflated", err)
	}

	// The bound is exact: a stream of exactly b.inflated bytes unpacks.
	valid := paxFloodArchive(t, "v1.0.0", 2, 64<<10)
	b.inflated = inflatedSize(t, valid)
	if err := unpackWithin(bytes.NewReader(valid), t.TempDir(), b); err != nil {
		t.Fatalf("unpackWithin(%d bytes inflated, bound %d) = %v, want nil", b.inflated, b.inflated, err)
	}
	b.inflated--
	if err := unpackWithin(bytes.NewReader(valid), t.TempDir(), b); !errors.Is(err, ErrUnsafeArchive) || !strings.Contains(err.Error(), "inflated") {
		t.Fatalf("unpackWithin(%d bytes inflated, bound %d) = %v, want ErrUnsafeArchive naming the bound", b.inflated+1, b.inflated, err)
	}
}
