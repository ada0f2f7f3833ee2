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
// backslashes, NUL and other control bytes, '%' (callers decode once; a
// '%' left over means double encoding), invalid UTF-8, empty, "." and ".."
// segments, segments starting with '.' (temp and lock files), and every
// shape but the three above.
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

// ResolveDownload maps a path relative to shared.dir to the absolute path of
// a file that may be served. Only history/<cluster>/<name>.db,
// history/<cluster>/<name>.db.gz and merged/<name>.db qualify. It returns
// ErrNotFound for any other shape, an unsafe segment, a symlink at any
// level below the root, a file with more than one hard link, a file inside
// storage.dir (when storage.dir lies inside shared.dir), a non-regular file
// or a missing one. The live file is never served by path: use SnapshotLive.
// Prefer OpenDownload, which returns the checked file itself.
func (r *Recorder) ResolveDownload(rel string) (string, error) {
	f, _, err := r.openServable(rel)
	if err != nil {
		return "", fmt.Errorf("resolve %q: %w", rel, err)
	}
	f.Close()
	return f.Name(), nil
}

// OpenDownload opens a file by a path relative to shared.dir under the same
// rules as ResolveDownload. Every folder on the way is opened without
// following symlinks and the file itself with O_NOFOLLOW, so a component
// swapped for a symlink at any moment is refused (ErrNotFound) rather than
// followed.
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
