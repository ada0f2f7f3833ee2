package release

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// Bounds on a release archive.
const (
	MaxArchiveEntries = 2000
	MaxUnpackedBytes  = 50 << 20
	MaxArchiveDirs    = 256
	// MaxInflatedBytes caps everything read from the gzip stream, headers
	// and padding included: the tar reader skips any number of PAX headers
	// inside one entry, so bounding content alone is not enough.
	MaxInflatedBytes = MaxUnpackedBytes + 8<<20
	maxArchiveBytes  = MaxUnpackedBytes + 4<<20 // the compressed download
	maxTrailingBytes = 1 << 20                  // padding after the tar end
)

// ErrUnsafeArchive marks a release archive refused for its content.
var ErrUnsafeArchive = errors.New("unsafe ui bundle archive")

func unsafeEntry(name, format string, args ...any) error {
	return fmt.Errorf("%w: entry %q: %s", ErrUnsafeArchive, name, fmt.Sprintf(format, args...))
}

// bounds are the limits of one unpack (tests scale them down).
type bounds struct {
	entries  int   // tar entries
	dirs     int   // directories created, named by an entry or implied
	unpacked int64 // bytes of file content
	inflated int64 // bytes read from the gzip stream
}

// unpackArchive extracts a tar.gz into dir (which must exist and be empty)
// under the release bounds: regular files (0600) and directories (0700)
// only, every name local to dir. On error dir holds a partial tree the
// caller removes.
func unpackArchive(r io.Reader, dir string) error {
	return unpackWithin(r, dir, bounds{entries: MaxArchiveEntries, dirs: MaxArchiveDirs, unpacked: MaxUnpackedBytes, inflated: MaxInflatedBytes})
}

// unpackWithin is unpackArchive under the bounds b.
func unpackWithin(r io.Reader, dir string, b bounds) error {
	zr, err := gzip.NewReader(r)
	if err != nil {
		return fmt.Errorf("%w: not a gzip stream: %v", ErrUnsafeArchive, err)
	}
	in := &capReader{r: zr, left: b.inflated}
	err = unpackTar(in, dir, b)
	if in.over { // first: the tar reader reports the cut as an error of its own
		return fmt.Errorf("%w: more than %d MiB inflated (headers and padding included)", ErrUnsafeArchive, b.inflated>>20)
	}
	if err != nil {
		return err
	}
	return zr.Close()
}

// unpackTar extracts the tar stream read from in and reads in to its end.
func unpackTar(in io.Reader, dir string, b bounds) error {
	tr := tar.NewReader(in)
	var entries int
	var total int64
	seen := map[string]bool{}
	dirs := dirCount{limit: b.dirs, made: map[string]bool{}}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("%w: truncated or corrupt archive: %v", ErrUnsafeArchive, err)
		}
		entries++
		if entries > b.entries {
			return fmt.Errorf("%w: more than %d entries", ErrUnsafeArchive, b.entries)
		}
		name, err := localName(h.Name)
		if err != nil {
			return err
		}
		if name == "." {
			continue
		}
		if seen[name] {
			return unsafeEntry(h.Name, "appears twice")
		}
		seen[name] = true
		if err := dirs.add(name, h.Typeflag == tar.TypeDir); err != nil {
			return err
		}
		target := filepath.Join(dir, filepath.FromSlash(name))
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o700); err != nil {
				return fmt.Errorf("unpack %s: %w", name, err)
			}
		case tar.TypeReg:
			if h.Size > b.unpacked-total {
				return tooLarge(b)
			}
			n, err := writeEntry(target, tr, b.unpacked-total, tooLarge(b))
			total += n
			if err != nil {
				return err
			}
		case tar.TypeSymlink, tar.TypeLink:
			return unsafeEntry(h.Name, "links are not allowed")
		case tar.TypeChar, tar.TypeBlock, tar.TypeFifo:
			return unsafeEntry(h.Name, "device files and FIFOs are not allowed")
		default:
			return unsafeEntry(h.Name, "entry type %q is not allowed", h.Typeflag)
		}
	}
	// Read the rest so the gzip checksum and length are verified.
	n, err := io.Copy(io.Discard, io.LimitReader(in, maxTrailingBytes+1))
	if err != nil {
		return fmt.Errorf("%w: truncated or corrupt archive: %v", ErrUnsafeArchive, err)
	}
	if n > maxTrailingBytes {
		return fmt.Errorf("%w: data after the end of the tar stream", ErrUnsafeArchive)
	}
	return nil
}

// errInflated ends reading once a capReader's bound is passed.
var errInflated = errors.New("inflated stream over its bound")

// capReader reads at most left bytes of r; reading past them sets over
// and fails every read (one byte more is asked for, to tell a stream that
// ends at the bound from one that goes on).
type capReader struct {
	r    io.Reader
	left int64
	over bool
}

func (c *capReader) Read(p []byte) (int, error) {
	if c.over {
		return 0, errInflated
	}
	if int64(len(p)) > c.left+1 {
		p = p[:c.left+1]
	}
	n, err := c.r.Read(p)
	if int64(n) > c.left {
		c.over = true
		return 0, errInflated
	}
	c.left -= int64(n)
	return n, err
}

// dirCount counts the directories an unpack creates, those a file's path
// implies (MkdirAll makes every parent) included, each once.
type dirCount struct {
	limit int
	made  map[string]bool
}

// add counts the parents of name, and name itself when it is a directory,
// before anything is created; the walk up stops at the first directory
// already counted, so the work is bounded by the limit, not the depth.
func (c *dirCount) add(name string, isDir bool) error {
	d := name
	if !isDir {
		d = path.Dir(name)
	}
	for ; d != "." && !c.made[d]; d = path.Dir(d) {
		if len(c.made) >= c.limit {
			return fmt.Errorf("%w: more than %d directories (named or implied by a path)", ErrUnsafeArchive, c.limit)
		}
		c.made[d] = true
	}
	return nil
}

func tooLarge(b bounds) error {
	return fmt.Errorf("%w: more than %d MiB unpacked", ErrUnsafeArchive, b.unpacked>>20)
}

// localName validates an entry name and returns it cleaned, slash-separated.
func localName(raw string) (string, error) {
	if raw == "" || strings.ContainsAny(raw, "\\\x00") {
		return "", unsafeEntry(raw, "empty name or a backslash or NUL in it")
	}
	if strings.HasPrefix(raw, "/") {
		return "", unsafeEntry(raw, "absolute path")
	}
	for _, seg := range strings.Split(raw, "/") {
		if seg == ".." {
			return "", unsafeEntry(raw, "path traversal ('..')")
		}
	}
	name := path.Clean(raw)
	if name != "." && !filepath.IsLocal(filepath.FromSlash(name)) {
		return "", unsafeEntry(raw, "not a local path")
	}
	return name, nil
}

// writeEntry writes at most budget bytes of r to a new file at target,
// failing with over past that; it never follows or replaces an existing
// path.
func writeEntry(target string, r io.Reader, budget int64, over error) (int64, error) {
	if err := os.MkdirAll(filepath.Dir(target), 0o700); err != nil {
		return 0, fmt.Errorf("unpack %s: %w", target, err)
	}
	f, err := os.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return 0, fmt.Errorf("unpack %s: %w", target, err)
	}
	n, err := io.Copy(f, io.LimitReader(r, budget+1))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	switch {
	case err != nil:
		return n, fmt.Errorf("%w: truncated or corrupt archive: %v", ErrUnsafeArchive, err)
	case n > budget:
		return n, over
	}
	return n, nil
}
