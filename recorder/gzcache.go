package recorder

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// Bounds of the archive cache. An archive (.db.gz) is decompressed before
// SQLite can read it; the archive comes from the shared folder, so what it
// inflates to is bounded here, not by the file.
const (
	// MaxInflatedArchiveBytes caps the decompressed size of one archive read
	// by Trace or TraceByLabel: 1 GiB. A larger archive is skipped with
	// ErrArchiveTooLarge (logged, the rest of the history is still read).
	MaxInflatedArchiveBytes = 1 << 30
	// maxCacheBytes caps the decompressed copies kept between traces; least
	// recently used idle copies are removed beyond it.
	maxCacheBytes = 2 << 30
	// maxCacheEntries caps the number of copies kept.
	maxCacheEntries = 8
)

// ErrArchiveTooLarge: an archive decompresses to more than the cap that
// applies to it (MaxInflatedArchiveBytes for traces). Nothing beyond the cap
// was written.
var ErrArchiveTooLarge = errors.New("recorder: archive decompresses beyond its size cap")

// gzCache keeps decompressed copies of archives so repeated traces do not
// inflate the same archive again. An entry is valid while the archive's
// mtime and size are unchanged (archiving replaces the file, which changes
// both); entries whose archive is gone or changed are dropped by prune.
// Entries in use are never removed under their reader.
type gzCache struct {
	mu         sync.Mutex
	base       string // parent of the cache folder; "" = os.TempDir()
	prefix     string // cache folder name prefix
	dir        string // created on first use
	maxEntries int
	maxFile    int64 // cap on one decompressed copy
	maxTotal   int64 // cap on all idle copies together
	total      int64 // bytes of the copies in entries
	tick       uint64
	entries    map[string]*gzEntry
}

type gzEntry struct {
	modTime time.Time
	size    int64
	ready   chan struct{} // closed once tmp or err is set
	tmp     string
	bytes   int64
	err     error
	refs    int
	lastUse uint64
	dropped bool // no longer in entries: remove tmp on last release
}

func newGzCache(base, prefix string) *gzCache {
	return &gzCache{base: base, prefix: prefix, maxEntries: maxCacheEntries,
		maxFile: MaxInflatedArchiveBytes, maxTotal: maxCacheBytes, entries: map[string]*gzEntry{}}
}

// open returns the path of a decompressed copy of the archive f and a
// release function the caller must call when done with it. One caller
// inflates; concurrent callers for the same archive wait for it (or for
// their ctx).
func (c *gzCache) open(ctx context.Context, r *Recorder, f histFile) (string, func(), error) {
	c.mu.Lock()
	c.tick++
	e := c.entries[f.path]
	if e != nil && (!e.modTime.Equal(f.modTime) || e.size != f.size) {
		c.drop(f.path, e)
		e = nil
	}
	if e != nil {
		e.refs++
		e.lastUse = c.tick
		c.mu.Unlock()
		select {
		case <-e.ready:
		case <-ctx.Done():
			c.release(e)
			return "", nil, ctx.Err()
		}
		if e.err != nil {
			c.release(e)
			return "", nil, e.err
		}
		return e.tmp, func() { c.release(e) }, nil
	}
	e = &gzEntry{modTime: f.modTime, size: f.size, ready: make(chan struct{}), refs: 1, lastUse: c.tick}
	c.entries[f.path] = e
	c.mu.Unlock()

	tmp, n, err := c.inflate(ctx, r, f)

	c.mu.Lock()
	e.tmp, e.bytes, e.err = tmp, n, err
	close(e.ready)
	if err != nil {
		if !e.dropped {
			delete(c.entries, f.path)
			e.dropped = true
		}
		c.mu.Unlock()
		c.release(e)
		return "", nil, err
	}
	if !e.dropped {
		c.total += n
		c.evict()
	}
	c.mu.Unlock()
	return tmp, func() { c.release(e) }, nil
}

func (c *gzCache) release(e *gzEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e.refs--
	if e.dropped && e.refs == 0 && e.tmp != "" {
		os.Remove(e.tmp)
	}
	if !e.dropped && e.refs == 0 {
		c.evict()
	}
}

// drop forgets an entry, removing its file now or on its last release.
func (c *gzCache) drop(path string, e *gzEntry) {
	delete(c.entries, path)
	e.dropped = true
	if e.tmp != "" {
		c.total -= e.bytes
	}
	if e.refs == 0 && e.tmp != "" {
		os.Remove(e.tmp)
	}
}

// evict drops least recently used idle entries while there are more than
// maxEntries or they hold more than maxTotal bytes.
func (c *gzCache) evict() {
	for len(c.entries) > c.maxEntries || c.total > c.maxTotal {
		var oldest string
		for p, e := range c.entries {
			if e.refs == 0 && e.tmp != "" && (oldest == "" || e.lastUse < c.entries[oldest].lastUse) {
				oldest = p
			}
		}
		if oldest == "" {
			return
		}
		c.drop(oldest, c.entries[oldest])
	}
}

// prune drops every entry whose archive is not among present with the same
// mtime and size: the archive was removed or replaced.
func (c *gzCache) prune(present []histFile) {
	keep := map[string]histFile{}
	for _, f := range present {
		if f.shape == shapeArchive {
			keep[f.path] = f
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for p, e := range c.entries {
		f, ok := keep[p]
		if !ok || !e.modTime.Equal(f.modTime) || e.size != f.size {
			c.drop(p, e)
		}
	}
}

// cached reports how many copies the cache holds and their total size.
func (c *gzCache) cached() (int, int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries), c.total
}

// inflate decompresses the archive f into a new 0600 file in the cache
// folder, refusing beyond maxFile bytes.
func (c *gzCache) inflate(ctx context.Context, r *Recorder, f histFile) (string, int64, error) {
	src, _, err := r.openSharedFile(f.segs, false)
	if err != nil {
		return "", 0, err
	}
	defer src.Close()
	r.stats.archiveInflations.Add(1)
	c.mu.Lock()
	if c.dir == "" {
		dir, err := os.MkdirTemp(c.base, c.prefix)
		if err != nil {
			c.mu.Unlock()
			return "", 0, fmt.Errorf("create archive cache: %w", err)
		}
		c.dir = dir
	}
	cacheDir := c.dir
	c.mu.Unlock()
	out, err := os.CreateTemp(cacheDir, "archive-*.db")
	if err != nil {
		return "", 0, fmt.Errorf("create archive copy: %w", err)
	}
	n, err := inflateTo(ctx, out, src, c.maxFile)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(out.Name())
		return "", 0, fmt.Errorf("decompress %s: %w", f.rel, err)
	}
	return out.Name(), n, nil
}

// inflateTo writes the gunzipped content of src to w, at most max bytes:
// more gives ErrArchiveTooLarge. It stops when ctx ends.
func inflateTo(ctx context.Context, w io.Writer, src io.Reader, max int64) (int64, error) {
	zr, err := gzip.NewReader(src)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(w, io.LimitReader(ctxReader{ctx, zr}, max+1))
	if err != nil {
		return n, err
	}
	if n > max {
		return n, fmt.Errorf("%w (%d bytes)", ErrArchiveTooLarge, max)
	}
	return n, zr.Close()
}

// ctxReader stops a long copy when its context ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// close removes the cache folder.
func (c *gzCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dir != "" {
		os.RemoveAll(c.dir)
		c.dir = ""
	}
	c.entries = map[string]*gzEntry{}
	c.total = 0
}
