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

// fileVFS is a read-only SQLite VFS whose file names are tokens standing
// for files the recorder opened itself (walked without symlinks, checked
// regular with one link), so SQLite reads exactly the checked file and
// never resolves a path in the shared folder.
type fileVFS struct {
	mu    sync.Mutex
	reg   *vfs.FS // nil until first use and after close
	name  string  // the registered VFS name
	seq   uint64
	files map[string]*os.File
}

// uri lends f to SQLite: a URI opening it read-only, and a function ending
// the loan. f must stay open until every connection using it is closed.
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

// Open implements fs.FS for the VFS: each open gets its own positioned
// reader; closing it leaves the lent file open.
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

// close unregisters the VFS (it stays while SQLite has a file open).
func (v *fileVFS) close() {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.reg != nil && v.reg.Close() == nil {
		v.reg = nil
	}
}

// queryOpen runs fn on the finished database f after checking its schema
// version.
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
