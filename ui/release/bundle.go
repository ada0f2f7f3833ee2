package release

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"time"

	"svc/ui"
)

// Bundle layout: the shells at the root, static files under assets/, and a
// VERSION file naming the tag, added when packing.
const (
	shellFile    = "index.html"
	notFoundFile = "404.html"
	versionFile  = "VERSION"
	assetsDir    = "assets"
)

// ArchiveName is the release tarball's file name for tag.
func ArchiveName(tag string) string { return "svc-ui-" + tag + ".tar.gz" }

// packEpoch is every entry's mtime, so a pack depends on content only.
var packEpoch = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// Pack writes svc-ui-<tag>.tar.gz and its .sha256 (sha256sum format), 0600,
// into outDir from the embedded tree, reproducibly. tag must be
// ui.EmbeddedTag: release tags are immutable.
func Pack(tag, outDir string) (tarPath, sumPath string, err error) {
	if err := ui.CheckTag(tag); err != nil {
		return "", "", err
	}
	if tag != ui.EmbeddedTag {
		return "", "", fmt.Errorf("pack ui bundle %s: this binary embeds %s (release tags are immutable)", tag, ui.EmbeddedTag)
	}
	tarPath = filepath.Join(outDir, ArchiveName(tag))
	sumPath = tarPath + ".sha256"
	var buf bytes.Buffer
	err = writeArchive(&buf, ui.Embedded(), tag)
	if err == nil {
		err = os.MkdirAll(outDir, 0o700)
	}
	if err == nil {
		err = writeFileAtomic(tarPath, buf.Bytes())
	}
	if err == nil {
		sum := sha256.Sum256(buf.Bytes())
		err = writeFileAtomic(sumPath, []byte(hex.EncodeToString(sum[:])+"  "+ArchiveName(tag)+"\n"))
	}
	if err != nil {
		return "", "", fmt.Errorf("pack ui bundle %s: %w", tag, err)
	}
	return tarPath, sumPath, nil
}

// writeArchive writes fsys plus a VERSION file as a reproducible tar.gz:
// sorted entries, fixed mtimes and modes, no owner names or gzip time.
func writeArchive(w io.Writer, fsys fs.FS, tag string) error {
	files := map[string][]byte{versionFile: []byte(tag + "\n")}
	dirs := map[string]bool{}
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == "." {
			return err
		}
		if d.IsDir() {
			dirs[p] = true
			return nil
		}
		b, err := fs.ReadFile(fsys, p)
		files[p] = b
		return err
	})
	if err != nil {
		return err
	}
	names := make([]string, 0, len(files)+len(dirs))
	for p := range files {
		names = append(names, p)
	}
	for p := range dirs {
		names = append(names, p+"/")
	}
	sort.Strings(names)

	zw, err := gzip.NewWriterLevel(w, gzip.BestCompression)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(zw)
	for _, n := range names {
		h := &tar.Header{Name: n, ModTime: packEpoch, Format: tar.FormatUSTAR}
		body, isFile := files[n]
		if isFile {
			h.Typeflag, h.Mode, h.Size = tar.TypeReg, 0o644, int64(len(body))
		} else {
			h.Typeflag, h.Mode = tar.TypeDir, 0o755
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if _, err := tw.Write(body); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return zw.Close()
}

// writeFileAtomic writes data to path through a temporary file and a rename.
func writeFileAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-"+filepath.Base(path)+"-")
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}
