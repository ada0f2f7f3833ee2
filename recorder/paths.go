package recorder

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
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
// level below the root, a path resolving outside the root, a file inside
// storage.dir (when storage.dir lies inside shared.dir), a non-regular file
// or a missing one. The live file is never served by path: use SnapshotLive.
func (r *Recorder) ResolveDownload(rel string) (string, error) {
	segs, _, ok := parseShape(rel)
	if !ok {
		return "", fmt.Errorf("resolve %q: %w", rel, ErrNotFound)
	}
	abs, err := r.resolveExisting(segs)
	if err != nil {
		return "", fmt.Errorf("resolve %q: %w", rel, err)
	}
	return abs, nil
}

// OpenDownload resolves rel like ResolveDownload and opens the file for
// serving. The open does not follow a symlink and the opened file must be
// the one checked, so a component swapped between check and open is refused
// with ErrNotFound too.
func (r *Recorder) OpenDownload(rel string) (*os.File, os.FileInfo, error) {
	abs, err := r.ResolveDownload(rel)
	if err != nil {
		return nil, nil, err
	}
	checked, err := os.Lstat(abs)
	if err != nil {
		return nil, nil, fmt.Errorf("open %q: %w", rel, ErrNotFound)
	}
	f, err := os.OpenFile(abs, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("open %q: %w", rel, ErrNotFound)
	}
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() || !os.SameFile(checked, fi) {
		f.Close()
		return nil, nil, fmt.Errorf("open %q: %w", rel, ErrNotFound)
	}
	return f, fi, nil
}

// resolveExisting walks segs from the shared root with Lstat, refusing
// symlinks and anything but folders then one regular file, and confirms
// the real path is still under the root and outside the worker's own
// storage.dir.
func (r *Recorder) resolveExisting(segs []string) (string, error) {
	if r.sharedRoot == "" {
		return "", ErrNotFound
	}
	cur := r.sharedRoot
	for i, s := range segs {
		cur = filepath.Join(cur, s)
		fi, err := os.Lstat(cur)
		if err != nil {
			return "", ErrNotFound
		}
		last := i == len(segs)-1
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			return "", ErrNotFound
		case last && !fi.Mode().IsRegular():
			return "", ErrNotFound
		case !last && !fi.IsDir():
			return "", ErrNotFound
		}
	}
	real, err := filepath.EvalSymlinks(cur)
	if err != nil || real != cur || !within(real, r.sharedRoot) {
		return "", ErrNotFound
	}
	if r.guardOwnDir && within(real, r.ownDir) {
		return "", ErrNotFound
	}
	return real, nil
}

// relSlash returns path relative to root in slash form, for logs and API
// answers; never an absolute path.
func relSlash(root, path string) string {
	if root == "" {
		return filepath.Base(path)
	}
	rel, err := filepath.Rel(root, path)
	if err != nil {
		return filepath.Base(path)
	}
	return filepath.ToSlash(rel)
}
