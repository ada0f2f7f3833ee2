package release

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// entry is one member of a hand-built test archive.
type entry struct {
	name     string
	typ      byte
	body     []byte
	size     int64 // when body is nil and size > 0, size zero bytes
	linkname string
}

// buildArchive writes entries as a tar.gz exactly as given.
func buildArchive(t testing.TB, entries []entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		typ := e.typ
		if typ == 0 {
			typ = tar.TypeReg
		}
		h := &tar.Header{Name: e.name, Typeflag: typ, Mode: 0o644, Linkname: e.linkname, Format: tar.FormatPAX}
		if typ == tar.TypeReg {
			h.Size = int64(len(e.body))
			if e.body == nil {
				h.Size = e.size
			}
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatalf("tar header %q: %v", e.name, err)
		}
		if e.body != nil {
			tw.Write(e.body)
		} else if e.size > 0 {
			zeros := make([]byte, 1<<20)
			for left := e.size; left > 0; left -= int64(len(zeros)) {
				tw.Write(zeros[:min(left, int64(len(zeros)))])
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// bundleEntries is a minimal valid bundle of tag plus extra entries.
func bundleEntries(tag string, extra ...entry) []entry {
	return append([]entry{
		{name: "index.html", body: []byte("<!doctype html>shell")},
		{name: "404.html", body: []byte("<!doctype html>missing")},
		{name: "VERSION", body: []byte(tag + "\n")},
	}, extra...)
}

func sumLine(data []byte, name string) []byte {
	s := sha256.Sum256(data)
	return []byte(hex.EncodeToString(s[:]) + "  " + name + "\n")
}

// mirror is a release mirror on httptest serving files by path.
type mirror struct {
	*httptest.Server
	mu    sync.Mutex
	files map[string][]byte
	hits  map[string]int
	hook  func(w http.ResponseWriter, r *http.Request) bool // true = handled
}

func newMirror(t *testing.T) *mirror {
	m := &mirror{files: map[string][]byte{}, hits: map[string]int{}}
	m.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.mu.Lock()
		m.hits[r.URL.Path]++
		body, ok := m.files[r.URL.Path]
		hook := m.hook
		m.mu.Unlock()
		if hook != nil && hook(w, r) {
			return
		}
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Write(body)
	}))
	t.Cleanup(m.Close)
	return m
}

// release publishes archive under /releases/<tag>/ with a matching sum.
func (m *mirror) release(tag string, archive []byte) {
	name := ArchiveName(tag)
	m.put("/releases/"+tag+"/"+name, archive)
	m.put("/releases/"+tag+"/"+name+".sha256", sumLine(archive, name))
}

// setHook installs a handler that runs first; it returns true when it
// answered the request.
func (m *mirror) setHook(h func(w http.ResponseWriter, r *http.Request) bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.hook = h
}

func (m *mirror) put(path string, body []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.files[path] = body
}

func (m *mirror) hitCount(path string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.hits[path]
}

func (m *mirror) repo() string { return m.URL + "/releases" }

// assertEmptyCache fails unless dir holds nothing at all: no tag directory
// and no temporary leftovers.
func assertEmptyCache(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	for _, e := range entries {
		t.Errorf("cache holds %s after a refused fetch", e.Name())
	}
}

// assertSameTree fails unless dir holds exactly the files of fsys (plus
// VERSION) with the same bytes, files 0600 and directories 0700.
func assertSameTree(t *testing.T, fsys fs.FS, dir, tag string) {
	t.Helper()
	want := map[string][]byte{"VERSION": []byte(tag + "\n")}
	fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			want[p], _ = fs.ReadFile(fsys, p)
		}
		return err
	})
	got := map[string][]byte{}
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, _ := d.Info()
		rel, _ := filepath.Rel(dir, p)
		switch {
		case d.IsDir() && info.Mode().Perm() != 0o700:
			t.Errorf("%s mode %v, want 0700", rel, info.Mode().Perm())
		case !d.IsDir() && info.Mode().Perm() != 0o600:
			t.Errorf("%s mode %v, want 0600", rel, info.Mode().Perm())
		}
		if !d.IsDir() {
			got[filepath.ToSlash(rel)], _ = os.ReadFile(p)
		}
		return nil
	})
	if len(got) != len(want) {
		t.Errorf("cache holds %d files, want %d", len(got), len(want))
	}
	for p, b := range want {
		if !bytes.Equal(got[p], b) {
			t.Errorf("cached %s differs from the embedded file", p)
		}
	}
}
