package recorder

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
)

// Bounds of the archive cache: archives come from the shared folder, so
// what they inflate to is bounded here, not by the file.
const (
	// MaxInflatedArchiveBytes caps the decompressed size of one archive read
	// by a trace (1 GiB): a larger one is refused with ErrArchiveTooLarge.
	MaxInflatedArchiveBytes = 1 << 30
	// maxCacheBytes caps the idle copies kept between traces (LRU).
	maxCacheBytes = 2 << 30
	// maxCacheEntries caps the number of copies kept.
	maxCacheEntries = 8
	// maxRefusedArchives caps the refused archives remembered (LRU).
	maxRefusedArchives = 1024
)

// ErrArchiveTooLarge: an archive decompresses beyond its cap
// (MaxInflatedArchiveBytes, or the size its SQLite header declares).
// Nothing beyond the cap was written.
var ErrArchiveTooLarge = errors.New("recorder: archive decompresses beyond its size cap")

// ErrArchiveNotDatabase: an archive is empty, does not start with a SQLite
// header, or holds less than the header declares.
var ErrArchiveNotDatabase = errors.New("recorder: archive does not decompress to a SQLite database")

// errArchiveRefused marks an archive refused by this or an earlier trace,
// skipped without a word (recorder_archive_refused was logged once).
var errArchiveRefused = errors.New("recorder: archive refused")

// gzCache keeps decompressed copies of archives so repeated traces do not
// inflate the same archive again, and remembers archives refused. Entries
// are valid while the archive's mtime and size are unchanged (archiving
// replaces the file); prune drops the others. Entries in use are never
// removed under their reader.
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
	maxRefused int
	refused    map[string]*refusal // archives not to inflate again while unchanged
}

// refusal remembers an unreadable archive by its size and mtime then.
type refusal struct {
	fileStamp
	lastUse uint64
}

type gzEntry struct {
	fileStamp
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
		maxFile: MaxInflatedArchiveBytes, maxTotal: maxCacheBytes, entries: map[string]*gzEntry{},
		maxRefused: maxRefusedArchives, refused: map[string]*refusal{}}
}

// open returns the path of a decompressed copy of the archive f and a
// release function to call when done. One caller inflates; concurrent
// callers wait for it (or their ctx). An archive refused before and
// unchanged since gives errArchiveRefused at once.
func (c *gzCache) open(ctx context.Context, r *Recorder, f histFile) (string, func(), error) {
	c.mu.Lock()
	c.tick++
	if rf := c.refused[f.path]; rf != nil {
		if rf.of(f) {
			rf.lastUse = c.tick
			c.mu.Unlock()
			return "", nil, errArchiveRefused
		}
		delete(c.refused, f.path)
	}
	e := c.entries[f.path]
	if e != nil && !e.of(f) {
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
	e = &gzEntry{fileStamp: stampOf(f), ready: make(chan struct{}), refs: 1, lastUse: c.tick}
	c.entries[f.path] = e
	c.mu.Unlock()

	tmp, n, err := c.inflate(ctx, r, f)
	if err != nil && refusable(err) {
		c.refuse(r, f, err)
		err = fmt.Errorf("%w: %w", errArchiveRefused, err)
	}

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

// refusable reports whether an inflation failed because of the archive's
// content (the same bytes fail the same way), not this worker's disk or
// context or a vanished file.
func refusable(err error) bool {
	var corrupt flate.CorruptInputError
	return errors.Is(err, ErrArchiveTooLarge) || errors.Is(err, ErrArchiveNotDatabase) ||
		errors.Is(err, gzip.ErrHeader) || errors.Is(err, gzip.ErrChecksum) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.As(err, &corrupt)
}

// refuse remembers that the archive f cannot be read, drops its copy,
// counts it and logs recorder_archive_refused (file and reason, never the
// content) unless it was refused already, unchanged.
func (c *gzCache) refuse(r *Recorder, f histFile, err error) {
	c.mu.Lock()
	c.tick++
	if rf := c.refused[f.path]; rf != nil && rf.of(f) {
		c.mu.Unlock()
		return
	}
	c.refused[f.path] = &refusal{fileStamp: stampOf(f), lastUse: c.tick}
	for len(c.refused) > c.maxRefused {
		var oldest string
		for p, rf := range c.refused {
			if oldest == "" || rf.lastUse < c.refused[oldest].lastUse {
				oldest = p
			}
		}
		delete(c.refused, oldest)
	}
	if e := c.entries[f.path]; e != nil && e.of(f) {
		c.drop(f.path, e)
	}
	c.mu.Unlock()
	r.stats.archivesRefused.Add(1)
	r.log.Warn("recorder_archive_refused", "file", f.rel, "size_bytes", f.size, "reason", err.Error(),
		"detail", "skipped by traces until it changes")
}

// prune drops every entry and refusal whose archive is gone or changed.
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
		if !ok || !e.of(f) {
			c.drop(p, e)
		}
	}
	for p, rf := range c.refused {
		f, ok := keep[p]
		if !ok || !rf.of(f) {
			delete(c.refused, p)
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
// folder, at most maxFile bytes.
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
	err = closeFile(out, err, false)
	if err != nil {
		os.Remove(out.Name())
		return "", 0, fmt.Errorf("decompress %s: %w", f.rel, err)
	}
	return out.Name(), n, nil
}

// sqliteMagic starts every SQLite database file.
const sqliteMagic = "SQLite format 3\x00"

// inflateTo writes the gunzipped content of src to w, at most max bytes
// (more: ErrArchiveTooLarge). The content must start with a SQLite header
// (else ErrArchiveNotDatabase after 100 bytes) and, when the header
// declares a size (page size × page count, when valid), be exactly that
// long: a declared size above max is refused before inflating further.
// It stops when ctx ends.
func inflateTo(ctx context.Context, w io.Writer, src io.Reader, max int64) (int64, error) {
	zr, err := gzip.NewReader(src)
	if errors.Is(err, io.EOF) {
		return 0, fmt.Errorf("%w (an empty file)", ErrArchiveNotDatabase)
	}
	if err != nil {
		return 0, err
	}
	in := ctxReader{ctx, zr}
	var head [100]byte
	if n, err := io.ReadFull(in, head[:]); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return 0, fmt.Errorf("%w (%d bytes)", ErrArchiveNotDatabase, n)
		}
		return 0, err
	}
	declared, err := declaredSize(head[:])
	if err != nil {
		return 0, err
	}
	limit := max
	if declared > 0 {
		if declared > max {
			return 0, fmt.Errorf("%w (its header declares %d bytes, the cap is %d)", ErrArchiveTooLarge, declared, max)
		}
		limit = declared
	}
	if _, err := w.Write(head[:]); err != nil {
		return 0, err
	}
	n, err := io.Copy(w, io.LimitReader(in, limit-int64(len(head))+1))
	n += int64(len(head))
	if err != nil {
		return n, err
	}
	switch {
	case n > limit && declared > 0:
		return n, fmt.Errorf("%w (content beyond the %d bytes its header declares)", ErrArchiveTooLarge, declared)
	case n > limit:
		return n, fmt.Errorf("%w (%d bytes)", ErrArchiveTooLarge, max)
	case n < declared:
		return n, fmt.Errorf("%w (%d bytes, its header declares %d)", ErrArchiveNotDatabase, n, declared)
	}
	return n, zr.Close()
}

// declaredSize checks a SQLite header and returns the database size it
// declares, or 0 when it declares none that is valid.
func declaredSize(head []byte) (int64, error) {
	if !bytes.HasPrefix(head, []byte(sqliteMagic)) {
		return 0, fmt.Errorf("%w (no SQLite header)", ErrArchiveNotDatabase)
	}
	pageSize := int64(binary.BigEndian.Uint16(head[16:18]))
	if pageSize == 1 {
		pageSize = 65536
	}
	if pageSize < 512 || pageSize&(pageSize-1) != 0 {
		return 0, fmt.Errorf("%w (page size %d)", ErrArchiveNotDatabase, pageSize)
	}
	pages := int64(binary.BigEndian.Uint32(head[28:32]))
	if pages == 0 || !bytes.Equal(head[24:28], head[92:96]) {
		return 0, nil
	}
	return pageSize * pages, nil
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
