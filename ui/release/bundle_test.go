package release

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"svc/ui"
)

func TestPackIsReproducible(t *testing.T) {
	t.Parallel()
	a, b := t.TempDir(), t.TempDir()
	tarA, sumA, err := Pack(ui.EmbeddedTag, a)
	if err != nil {
		t.Fatalf("Pack: %v", err)
	}
	tarB, sumB, err := Pack(ui.EmbeddedTag, filepath.Join(b, "new", "dir"))
	if err != nil {
		t.Fatalf("Pack into a new dir: %v", err)
	}
	if filepath.Base(tarA) != "svc-ui-"+ui.EmbeddedTag+".tar.gz" || sumA != tarA+".sha256" {
		t.Errorf("Pack paths = %s, %s", tarA, sumA)
	}
	for _, pair := range [][2]string{{tarA, tarB}, {sumA, sumB}} {
		x, _ := os.ReadFile(pair[0])
		y, _ := os.ReadFile(pair[1])
		if len(x) == 0 || !bytes.Equal(x, y) {
			t.Errorf("%s and %s differ: two packs must be byte-identical", pair[0], pair[1])
		}
	}
	data, _ := os.ReadFile(tarA)
	sum, _ := os.ReadFile(sumA)
	if want := sumLine(data, filepath.Base(tarA)); !bytes.Equal(sum, want) {
		t.Errorf("sha256 file = %q, want %q", sum, want)
	}
	if st, _ := os.Stat(tarA); st.Mode().Perm() != 0o600 {
		t.Errorf("archive mode %v, want 0600", st.Mode().Perm())
	}

	// Every entry is owned by root with the fixed time, in sorted order.
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if zr.Name != "" || !zr.ModTime.IsZero() {
		t.Errorf("gzip header name %q time %v, want neither", zr.Name, zr.ModTime)
	}
	tr := tar.NewReader(zr)
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Uid != 0 || h.Gid != 0 || h.Uname != "" || !h.ModTime.Equal(packEpoch) {
			t.Errorf("entry %s: uid %d gid %d uname %q mtime %v", h.Name, h.Uid, h.Gid, h.Uname, h.ModTime)
		}
		names = append(names, h.Name)
	}
	// Every embedded file and directory plus VERSION, sorted by name.
	wantNames := []string{"VERSION"}
	_ = fs.WalkDir(ui.Embedded(), ".", func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil || p == ".":
		case d.IsDir():
			wantNames = append(wantNames, p+"/")
		default:
			wantNames = append(wantNames, p)
		}
		return err
	})
	sort.Strings(wantNames)
	want := strings.Join(wantNames, ",")
	if got := strings.Join(names, ","); got != want || !strings.Contains(got, "assets/app.js,") {
		t.Errorf("entries = %s, want %s", got, want)
	}
}

func TestPackRefusesOtherTags(t *testing.T) {
	t.Parallel()
	for _, tag := range []string{"v9.9.9", "1.0.0", "v1.0", "latest"} {
		if _, _, err := Pack(tag, t.TempDir()); err == nil {
			t.Errorf("Pack(%q) = nil error, want a refusal", tag)
		}
	}
}

func TestStageEmbedded(t *testing.T) {
	t.Parallel()
	cache := t.TempDir()
	dir, err := StageEmbedded(cache)
	if err != nil {
		t.Fatalf("StageEmbedded: %v", err)
	}
	if dir != filepath.Join(cache, ui.EmbeddedTag) {
		t.Errorf("StageEmbedded = %s, want <cache>/%s", dir, ui.EmbeddedTag)
	}
	assertSameTree(t, ui.Embedded(), dir, ui.EmbeddedTag)
	if _, ok := CachedDir(cache, ui.EmbeddedTag); !ok {
		t.Errorf("CachedDir after staging = false")
	}
	// Staging again keeps the published copy.
	marker := filepath.Join(dir, "assets", "marker")
	os.WriteFile(marker, nil, 0o600)
	if again, err := StageEmbedded(cache); err != nil || again != dir {
		t.Fatalf("StageEmbedded again = %s, %v", again, err)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Errorf("second StageEmbedded replaced the cached tag")
	}
	entries, _ := os.ReadDir(cache)
	if len(entries) != 1 {
		t.Errorf("cache holds %d entries, want only the tag", len(entries))
	}
}
