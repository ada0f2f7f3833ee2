package recorder

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"unsafe"
)

// ErrUnsafePath: a folder or file below the shared root is a symlink, a
// hard link, or not the kind of entry its place calls for; nothing was
// written or deleted there.
var ErrUnsafePath = errors.New("recorder: symlink, hard link or unexpected entry in the shared folder")

// dir is a folder reached from a trusted root one component at a time with
// O_NOFOLLOW, so no component below the root is a symlink, not even one
// swapped in during the walk. Names inside it are used through the open
// folder (*at system calls), never followed if a symlink.
type dir struct {
	fd   int
	path string // the walked path, for messages and for files SQLite opens by name
	rel  string // relative to the root, slash form, for logs
}

// openDir opens root and then each of segs below it. A symlink or a
// non-folder on the way gives ErrUnsafePath, a missing folder
// os.ErrNotExist unless create is set (then it is made 0700). A folder
// below the root that is avoid (the worker's storage.dir) gives ErrNotFound.
func openDir(root string, segs []string, create bool, avoid os.FileInfo) (*dir, error) {
	fd, err := syscall.Open(root, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", root, err)
	}
	d := &dir{fd: fd, path: root}
	for _, s := range segs {
		if !plainName(s) {
			d.close()
			return nil, fmt.Errorf("open %q: %w", s, ErrUnsafePath)
		}
		next, err := openSub(d.fd, s, create)
		if err != nil {
			d.close()
			return nil, fmt.Errorf("open %s: %w", strings.TrimPrefix(d.rel+"/"+s, "/"), err)
		}
		syscall.Close(d.fd)
		d.fd, d.path, d.rel = next, filepath.Join(d.path, s), strings.TrimPrefix(d.rel+"/"+s, "/")
		if avoid != nil {
			if fi, err := d.statSelf(); err != nil || os.SameFile(fi, avoid) {
				d.close()
				return nil, fmt.Errorf("open %s: %w", d.rel, ErrNotFound)
			}
		}
	}
	return d, nil
}

// openSub opens folder name inside parent without following a symlink,
// creating it 0700 (whatever the umask) when create is set.
func openSub(parent int, name string, create bool) (int, error) {
	const flags = syscall.O_RDONLY | syscall.O_DIRECTORY | syscall.O_NOFOLLOW | syscall.O_CLOEXEC
	fd, err := syscall.Openat(parent, name, flags, 0)
	if err == syscall.ENOENT && create {
		merr := syscall.Mkdirat(parent, name, uint32(dirMode))
		fd, err = syscall.Openat(parent, name, flags, 0)
		if err == syscall.ENOENT && merr != nil {
			return -1, fmt.Errorf("mkdir: %w", merr)
		}
		if err == nil && merr == nil {
			if err := syscall.Fchmod(fd, uint32(dirMode)); err != nil {
				syscall.Close(fd)
				return -1, fmt.Errorf("chmod: %w", err)
			}
		}
	}
	switch {
	case err == nil:
		return fd, nil
	case err == syscall.ELOOP || err == syscall.ENOTDIR:
		return -1, ErrUnsafePath
	case err == syscall.ENOENT:
		return -1, os.ErrNotExist
	default:
		return -1, err
	}
}

// plainName reports whether s is one path segment: not empty, ".", ".."
// and without a slash or NUL.
func plainName(s string) bool {
	return s != "" && s != "." && s != ".." && !strings.ContainsAny(s, "/\x00")
}

func (d *dir) close() {
	if d.fd >= 0 {
		syscall.Close(d.fd)
		d.fd = -1
	}
}

func (d *dir) statSelf() (os.FileInfo, error) {
	f, err := d.file()
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Stat()
}

// file returns a duplicate of d's descriptor (close-on-exec) as a file.
func (d *dir) file() (*os.File, error) {
	nfd, _, errno := syscall.Syscall(syscall.SYS_FCNTL, uintptr(d.fd), syscall.F_DUPFD_CLOEXEC, 0)
	if errno != 0 {
		return nil, errors.New("dup folder descriptor")
	}
	return os.NewFile(nfd, d.path), nil
}

// openAt opens name in d without following a symlink.
func (d *dir) openAt(name string, flags int, perm os.FileMode) (*os.File, error) {
	if !plainName(name) {
		return nil, fmt.Errorf("open %q: %w", name, ErrUnsafePath)
	}
	fd, err := syscall.Openat(d.fd, name, flags|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, uint32(perm))
	if err != nil {
		if err == syscall.ELOOP {
			err = ErrUnsafePath
		}
		return nil, &os.PathError{Op: "open", Path: d.rel + "/" + name, Err: err}
	}
	return os.NewFile(uintptr(fd), filepath.Join(d.path, name)), nil
}

// openFile opens name for reading. It must be a regular file with exactly
// one link: a symlink, a hard link (which may point anywhere) or anything
// else gives ErrUnsafePath. O_NONBLOCK keeps a FIFO from hanging the open.
func (d *dir) openFile(name string) (*os.File, os.FileInfo, error) {
	f, err := d.openAt(name, syscall.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err == nil && !safeRegular(fi) {
		err = fmt.Errorf("open %s/%s: %w", d.rel, name, ErrUnsafePath)
	}
	if err == nil {
		// Regular files ignore O_NONBLOCK; clear it all the same.
		err = syscall.SetNonblock(int(f.Fd()), false)
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

// safeRegular reports whether fi is a regular file with one link.
func safeRegular(fi os.FileInfo) bool {
	if !fi.Mode().IsRegular() {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return !ok || st.Nlink <= 1
}

// stat describes name in d as Lstat would, without following a symlink.
func (d *dir) stat(name string) (os.FileInfo, error) {
	f, err := d.openAt(name, syscall.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Stat()
}

// exists reports whether anything, a symlink included, is called name in d.
func (d *dir) exists(name string) bool {
	_, err := d.stat(name)
	return err == nil || !errors.Is(err, os.ErrNotExist)
}

// readSmall reads the regular file name, refusing one larger than max:
// metadata and lock files come from peers and are read with a bound.
func (d *dir) readSmall(name string, max int64) ([]byte, error) {
	f, _, err := d.openFile(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err == nil && int64(len(data)) > max {
		err = fmt.Errorf("read %s/%s: larger than %d bytes", d.rel, name, max)
	}
	return data, err
}

// create makes a new file name in d with mode 0600; it fails when name exists.
func (d *dir) create(name string) (*os.File, error) {
	f, err := d.openAt(name, syscall.O_CREAT|syscall.O_EXCL|syscall.O_WRONLY, fileMode)
	if err != nil {
		return nil, err
	}
	if err := f.Chmod(fileMode); err != nil {
		f.Close()
		d.remove(name)
		return nil, err
	}
	return f, nil
}

// writeAtomic writes data to a hidden temp file in d, fsyncs it and renames
// it over name, so readers see the old or the new content only.
func (d *dir) writeAtomic(name string, data []byte) error {
	tmp := tempBase(name)
	f, err := d.create(tmp)
	if err != nil {
		return fmt.Errorf("write %s/%s: %w", d.rel, name, err)
	}
	_, err = f.Write(data)
	err = closeFile(f, err, true)
	if err == nil {
		err = d.rename(tmp, d, name)
	}
	if err != nil {
		d.remove(tmp)
		return fmt.Errorf("write %s/%s: %w", d.rel, name, err)
	}
	return nil
}

// remove deletes the file (or symlink) name in d; a missing name is no error.
func (d *dir) remove(name string) error {
	_, err := d.unlink(name)
	return err
}

// unlink deletes the file (or symlink) name in d and reports whether it
// was there: false, with no error, when someone else removed it first.
func (d *dir) unlink(name string) (bool, error) {
	if !plainName(name) {
		return false, fmt.Errorf("remove %q: %w", name, ErrUnsafePath)
	}
	err := syscall.Unlinkat(d.fd, name)
	if err == syscall.ENOENT {
		return false, nil
	}
	if err != nil {
		return false, &os.PathError{Op: "remove", Path: d.rel + "/" + name, Err: err}
	}
	return true, nil
}

// rename moves name in d to newName in to (renameat: neither name is
// followed if it is a symlink).
func (d *dir) rename(name string, to *dir, newName string) error {
	if !plainName(name) || !plainName(newName) {
		return fmt.Errorf("rename %q: %w", name, ErrUnsafePath)
	}
	if err := syscall.Renameat(d.fd, name, to.fd, newName); err != nil {
		return &os.LinkError{Op: "rename", Old: d.rel + "/" + name, New: to.rel + "/" + newName, Err: err}
	}
	return nil
}

// link makes newName in d a hard link to name in d (linkat, no follow).
func (d *dir) link(name, newName string) error {
	if !plainName(name) || !plainName(newName) {
		return fmt.Errorf("link %q: %w", name, ErrUnsafePath)
	}
	oldp, err := syscall.BytePtrFromString(name)
	if err != nil {
		return err
	}
	newp, err := syscall.BytePtrFromString(newName)
	if err != nil {
		return err
	}
	_, _, errno := syscall.Syscall6(syscall.SYS_LINKAT, uintptr(d.fd), uintptr(unsafe.Pointer(oldp)),
		uintptr(d.fd), uintptr(unsafe.Pointer(newp)), 0, 0)
	if errno != 0 {
		return &os.LinkError{Op: "link", Old: name, New: newName, Err: errno}
	}
	return nil
}

func (d *dir) names() ([]string, error) {
	f, err := d.file()
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	return f.Readdirnames(-1)
}

// sync fsyncs d so renames in it survive a power cut. Some file systems
// refuse to fsync folders; that is not worth failing over.
func (d *dir) sync() { syscall.Fsync(d.fd) }

// moveAt moves name in from to newName in to: a rename, or a copy through
// the two open folders when they are on different file systems
// (storage.dir and shared.dir usually are).
func moveAt(from *dir, name string, to *dir, newName string) error {
	err := from.rename(name, to, newName)
	var le *os.LinkError
	if err == nil || !errors.As(err, &le) || le.Err != syscall.EXDEV {
		return err
	}
	if err := copyAt(from, name, to, newName); err != nil {
		to.remove(newName)
		return err
	}
	return from.remove(name)
}

// copyAt copies the regular file name in from to a new 0600 file newName in to.
func copyAt(from *dir, name string, to *dir, newName string) error {
	in, _, err := from.openFile(name)
	if err != nil {
		return fmt.Errorf("copy %s: %w", name, err)
	}
	defer in.Close()
	out, err := to.create(newName)
	if err != nil {
		return fmt.Errorf("copy to %s/%s: %w", to.rel, newName, err)
	}
	_, err = io.Copy(out, in)
	err = closeFile(out, err, true)
	if err != nil {
		return fmt.Errorf("copy to %s/%s: %w", to.rel, newName, err)
	}
	return nil
}

// tempBase returns a hidden, unique name for a temp file beside name.
// Hidden names never match a download or merge shape and are skipped by
// every listing.
func tempBase(name string) string {
	return "." + name + "." + randToken(6) + ".tmp"
}
