package recorder

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"sync"

	"modernc.org/sqlite/vfs"

	"zombiezen.com/go/sqlite"
)

// fileVFS lets SQLite read files of the shared folder that the recorder
// opened itself (walked without symlinks, checked regular, one link): it is
// a read-only SQLite VFS whose file names are tokens standing for those
// open files. SQLite therefore reads exactly the checked file and never
// resolves a path in the shared folder, so a component swapped for a
// symlink after the check changes nothing.
type fileVFS struct {
	mu    sync.Mutex
	reg   *vfs.FS // nil until first use and after close
	name  string  // the registered VFS name
	seq   uint64
	files map[string]*os.File
}

// uri lends f to SQLite: it returns a URI that opens f read-only (for
// openConn or ATTACH) and a function that ends the loan. f must stay open
// until every connection that opened the URI is closed or detached.
func (v *fileVFS) uri(f *os.File) (string, func(), error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.reg == nil {
		name, reg, err := vfs.New(v)
		if err != nil {
			return "", nil, fmt.Errorf("register file vfs: %w", err)
		}
		v.name, v.reg = name, reg
	}
	if v.files == nil {
		v.files = map[string]*os.File{}
	}
	v.seq++
	tok := "f" + strconv.FormatUint(v.seq, 10) + ".db"
	v.files[tok] = f
	done := func() {
		v.mu.Lock()
		delete(v.files, tok)
		v.mu.Unlock()
	}
	return "file:" + tok + "?vfs=" + v.name + "&mode=ro", done, nil
}

// Open implements fs.FS for the VFS: each SQLite open gets its own reader
// (positioned reads, so connections never share a file offset). Closing it
// leaves the lent file open.
func (v *fileVFS) Open(name string) (fs.File, error) {
	v.mu.Lock()
	f := v.files[name]
	v.mu.Unlock()
	if f == nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	return &lentFile{SectionReader: io.NewSectionReader(f, 0, fi.Size()), fi: fi}, nil
}

type lentFile struct {
	*io.SectionReader
	fi os.FileInfo
}

func (l *lentFile) Stat() (fs.FileInfo, error) { return l.fi, nil }
func (l *lentFile) Close() error               { return nil }

// close unregisters the VFS; it stays registered while SQLite still has a
// file open through it.
func (v *fileVFS) close() {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.reg != nil && v.reg.Close() == nil {
		v.reg = nil
	}
}

// queryOpen runs fn on the finished database f (opened by the caller,
// usually through openSharedFile) after checking its schema version.
func queryOpen[T any](ctx context.Context, r *Recorder, f *os.File, fn func(*sqlite.Conn) ([]T, error)) ([]T, error) {
	uri, done, err := r.vfs.uri(f)
	if err != nil {
		return nil, err
	}
	defer done()
	return queryFinished(ctx, uri, f.Name(), fn)
}

// queryFinished runs fn on the finished database at uri, read-only, after
// checking its schema version; name names it in errors.
func queryFinished[T any](ctx context.Context, uri, name string, fn func(*sqlite.Conn) ([]T, error)) ([]T, error) {
	db, err := openConn(ctx, uri, sqlite.OpenReadOnly)
	if err != nil {
		return nil, fmt.Errorf("open database %s: %w", name, err)
	}
	defer db.Close()
	if err := checkVersion(db, "main"); err != nil {
		return nil, ctxErr(ctx, err)
	}
	out, err := fn(db)
	return out, ctxErr(ctx, err)
}
