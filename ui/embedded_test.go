package ui_test

import (
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"os"
	"strings"
	"testing"

	"svc/ui"
)

// treeHash hashes every path and content of fsys in walk order.
func treeHash(t *testing.T, fsys fs.FS) string {
	t.Helper()
	h := sha256.New()
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(fsys, p)
		h.Write([]byte(p + "\x00"))
		h.Write(b)
		h.Write([]byte{0})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Release tags are immutable: the embedded tree may only change together
// with EmbeddedTag. After editing ui/web, bump EmbeddedTag and run
// go test ./ui -run TestEmbeddedTreeMatchesItsTag -update.
func TestEmbeddedTreeMatchesItsTag(t *testing.T) {
	const path = "../testdata/ui/embedded.sha256"
	got := ui.EmbeddedTag + " " + treeHash(t, ui.Embedded()) + "\n"
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	wantTag, wantHash, _ := strings.Cut(strings.TrimSpace(string(want)), " ")
	gotTag, gotHash, _ := strings.Cut(strings.TrimSpace(got), " ")
	switch {
	case gotTag == wantTag && gotHash != wantHash:
		t.Errorf("ui/web changed but EmbeddedTag is still %s: bump it (tags are immutable), then rerun with -update", gotTag)
	case gotTag != wantTag:
		t.Errorf("EmbeddedTag is %s but %s records %s: rerun with -update", gotTag, path, wantTag)
	}
}
