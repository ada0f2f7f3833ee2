package recorder

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// The spec fixes these modes; they are set with Chmod after creation so
// the umask never changes them.
const (
	fileMode os.FileMode = 0o600
	dirMode  os.FileMode = 0o700
)

// createPrivateFile creates an empty file with mode 0600; it fails with an
// os.IsExist error when the file exists.
func createPrivateFile(path string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, fileMode)
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	if err := f.Chmod(fileMode); err != nil {
		f.Close()
		return fmt.Errorf("chmod %s: %w", path, err)
	}
	return f.Close()
}

// mkdirPrivate creates dir and missing parents; every folder it creates gets
// mode 0700. Existing folders keep their mode.
func mkdirPrivate(dir string) error {
	if fi, err := os.Stat(dir); err == nil {
		if !fi.IsDir() {
			return fmt.Errorf("mkdir %s: not a directory", dir)
		}
		return nil
	}
	if parent := filepath.Dir(dir); parent != dir {
		if err := mkdirPrivate(parent); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, dirMode); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("mkdir %s: %w", dir, err)
	}
	if err := os.Chmod(dir, dirMode); err != nil {
		return fmt.Errorf("chmod %s: %w", dir, err)
	}
	return nil
}

// writeFileAtomic writes data to a hidden temp file beside path, fsyncs it
// and renames it over path, so readers see the old or the new content only.
func writeFileAtomic(path string, data []byte) error {
	tmp := tempName(path)
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY, fileMode)
	if err != nil {
		return fmt.Errorf("create %s: %w", tmp, err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(fileMode)
	}
	err = closeFile(f, err, true)
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// tempName returns a hidden, unique name in path's folder (hidden names
// match no served shape and no listing).
func tempName(path string) string {
	return filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+"."+randToken(6)+".tmp")
}

// randToken returns n random bytes in hex.
func randToken(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// within reports whether path is root or below it. Both must be clean,
// absolute and already free of symlinks.
func within(path, root string) bool {
	if path == root {
		return true
	}
	if root == string(filepath.Separator) {
		return strings.HasPrefix(path, root)
	}
	return strings.HasPrefix(path, root+string(filepath.Separator))
}

// removeDB removes a SQLite file and its -wal, -shm and -journal companions.
func removeDB(path string) {
	for _, suffix := range []string{"", "-wal", "-shm", "-journal"} {
		os.Remove(path + suffix)
	}
}

// closeFile fsyncs f (with sync, after a successful write) and closes it,
// returning the first error: err, the write's, or its own.
func closeFile(f *os.File, err error, sync bool) error {
	if err == nil && sync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
