package recorder

import (
	"fmt"
	"os"
	"strings"
	"unicode/utf8"
)

// shape is one of the three path shapes the shared folder exposes.
type shape int

const (
	shapeSealed  shape = iota + 1 // history/<cluster>/<name>.db
	shapeArchive                  // history/<cluster>/<name>.db.gz
	shapeMerged                   // merged/<name>.db
)

// parseShape checks a slash-separated path relative to the shared root and
// returns its segments and shape. Rejected: empty paths, a leading '/',
// backslashes, control bytes, '%' (a leftover means double encoding),
// invalid UTF-8, empty, "." and ".." segments, segments starting with '.',
// and every other shape.
func parseShape(rel string) ([]string, shape, bool) {
	if rel == "" || rel[0] == '/' || !utf8.ValidString(rel) {
		return nil, 0, false
	}
	for i := 0; i < len(rel); i++ {
		if c := rel[i]; c < 0x20 || c == 0x7f || c == '\\' || c == '%' {
			return nil, 0, false
		}
	}
	segs := strings.Split(rel, "/")
	for _, s := range segs {
		if s == "" || s[0] == '.' {
			return nil, 0, false
		}
	}
	switch {
	case len(segs) == 3 && segs[0] == "history":
		name := segs[2]
		if base, ok := strings.CutSuffix(name, ".db.gz"); ok && base != "" {
			return segs, shapeArchive, true
		}
		if base, ok := strings.CutSuffix(name, ".db"); ok && base != "" {
			return segs, shapeSealed, true
		}
	case len(segs) == 2 && segs[0] == "merged":
		if base, ok := strings.CutSuffix(segs[1], ".db"); ok && base != "" {
			return segs, shapeMerged, true
		}
	}
	return nil, 0, false
}

// ResolveDownload maps a path relative to shared.dir to the absolute path
// of a file that may be served (history/<cluster>/<name>.db[.gz],
// merged/<name>.db): ErrNotFound for any other shape, an unsafe segment, a
// symlink or hard link, a file inside storage.dir, a non-regular or
// missing file. Prefer OpenDownload, which returns the checked file.
func (r *Recorder) ResolveDownload(rel string) (string, error) {
	f, _, err := r.openServable(rel)
	if err != nil {
		return "", fmt.Errorf("resolve %q: %w", rel, err)
	}
	f.Close()
	return f.Name(), nil
}

// OpenDownload opens a file by a path relative to shared.dir under the
// rules of ResolveDownload, walking without following symlinks, so a
// component swapped for one at any moment is refused (ErrNotFound).
func (r *Recorder) OpenDownload(rel string) (*os.File, os.FileInfo, error) {
	f, fi, err := r.openServable(rel)
	if err != nil {
		return nil, nil, fmt.Errorf("open %q: %w", rel, err)
	}
	return f, fi, nil
}

// openServable opens a file of one of the three shapes for serving or
// merging; every refusal is ErrNotFound.
func (r *Recorder) openServable(rel string) (*os.File, os.FileInfo, error) {
	segs, _, ok := parseShape(rel)
	if !ok {
		return nil, nil, ErrNotFound
	}
	f, fi, err := r.openSharedFile(segs, true)
	if err != nil {
		return nil, nil, ErrNotFound
	}
	return f, fi, nil
}
