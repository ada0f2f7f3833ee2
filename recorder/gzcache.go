package recorder

import (
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// gzCache keeps decompressed copies of archives (.db.gz) so repeated traces
// do not inflate the same archive again. An entry is valid while the
// archive's mtime and size are unchanged; archiving replaces the file, which
// changes both. Entries in use are never evicted.
type gzCache struct {
	mu      sync.Mutex
	base    string // parent of the cache folder; "" = os.TempDir()
	prefix  string // cache folder name prefix
	dir     string // created on first use
	max     int
	tick    uint64
	entries map[string]*gzEntry
}

type gzEntry struct {
	modTime time.Time
	size    int64
	tmp     string
	refs    int
	lastUse uint64
	stale   bool // replaced while in use: remove on last release
}

func newGzCache(base, prefix string, max int) *gzCache {
	return &gzCache{base: base, prefix: prefix, max: max, entries: map[string]*gzEntry{}}
}

// open returns the path of a decompressed copy of the archive at path and a
// release function the caller must call when done with it.
func (c *gzCache) open(path string, modTime time.Time, size int64) (string, func(), error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tick++
	e := c.entries[path]
	if e != nil && (!e.modTime.Equal(modTime) || e.size != size) {
		c.drop(path, e)
		e = nil
	}
	if e == nil {
		tmp, err := c.inflate(path)
		if err != nil {
			return "", nil, err
		}
		e = &gzEntry{modTime: modTime, size: size, tmp: tmp}
		c.entries[path] = e
		c.evict()
	}
	e.refs++
	e.lastUse = c.tick
	return e.tmp, func() { c.release(e) }, nil
}

func (c *gzCache) release(e *gzEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e.refs--
	if e.stale && e.refs == 0 {
		os.Remove(e.tmp)
	}
}

// drop forgets an entry, removing its file now or on its last release.
func (c *gzCache) drop(path string, e *gzEntry) {
	delete(c.entries, path)
	if e.refs == 0 {
		os.Remove(e.tmp)
	} else {
		e.stale = true
	}
}

// evict drops least recently used idle entries beyond max.
func (c *gzCache) evict() {
	for len(c.entries) > c.max {
		var oldest string
		for p, e := range c.entries {
			if e.refs == 0 && (oldest == "" || e.lastUse < c.entries[oldest].lastUse) {
				oldest = p
			}
		}
		if oldest == "" {
			return
		}
		c.drop(oldest, c.entries[oldest])
	}
}

// inflate decompresses path into a new 0600 file in the cache folder.
func (c *gzCache) inflate(path string) (string, error) {
	if c.dir == "" {
		dir, err := os.MkdirTemp(c.base, c.prefix)
		if err != nil {
			return "", fmt.Errorf("create archive cache: %w", err)
		}
		c.dir = dir
	}
	out, err := os.CreateTemp(c.dir, "archive-*.db")
	if err != nil {
		return "", fmt.Errorf("create archive copy: %w", err)
	}
	err = inflateTo(out, path)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(out.Name())
		return "", fmt.Errorf("decompress %s: %w", filepath.Base(path), err)
	}
	return out.Name(), nil
}

// inflateTo writes the gunzipped content of path to w.
func inflateTo(w io.Writer, path string) error {
	in, err := os.Open(path)
	if err != nil {
		return err
	}
	defer in.Close()
	zr, err := gzip.NewReader(in)
	if err != nil {
		return err
	}
	if _, err := io.Copy(w, zr); err != nil {
		return err
	}
	return zr.Close()
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
}
