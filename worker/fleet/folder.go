package fleet

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"time"
)

// FolderName is the card folder below the shared root.
const FolderName = "fleet"

// errUnsafe: a symlink, a hard link or another kind of entry where a card
// or the card folder belongs.
var errUnsafe = errors.New("symlink, hard link or unexpected entry")

// folder is the card folder, opened below the shared root. Nothing in it
// is followed out of it: os.Root confines every name, the folder itself
// must not be a symlink, and a card must be a regular file with one link.
type folder struct {
	root *os.Root
	path string
}

// openFolder opens (creating, 0700) {root}/fleet.
func openFolder(root string) (*folder, error) {
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, fmt.Errorf("open card folder: %w", err)
	}
	top, err := os.OpenRoot(root)
	if err != nil {
		return nil, fmt.Errorf("open card folder: %w", err)
	}
	defer top.Close()
	if err := top.Mkdir(FolderName, 0o700); err == nil {
		_ = top.Chmod(FolderName, 0o700) // the umask does not decide
	} else if !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("open card folder: %w", err)
	}
	before, err := top.Lstat(FolderName)
	if err != nil {
		return nil, fmt.Errorf("open card folder: %w", err)
	}
	if !before.IsDir() {
		return nil, fmt.Errorf("open card folder %s: %w", FolderName, errUnsafe)
	}
	r, err := top.OpenRoot(FolderName)
	if err != nil {
		return nil, fmt.Errorf("open card folder: %w", err)
	}
	// The folder opened must be the one checked, not a symlink swapped in.
	if now, err := r.Stat("."); err != nil || !os.SameFile(before, now) {
		r.Close()
		return nil, fmt.Errorf("open card folder %s: %w", FolderName, errUnsafe)
	}
	return &folder{root: r, path: r.Name()}, nil
}

func (f *folder) close() { f.root.Close() }

// cardFile is the file name of a worker's card.
func cardFile(name string) string { return name + ".json" }

// write publishes c atomically: a hidden temp file, fsynced, renamed over
// the card, then the folder fsynced.
func (f *folder) write(c *Card) error {
	data, err := json.Marshal(c)
	if err != nil {
		return fmt.Errorf("write card: %w", err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	tmp := "." + cardFile(c.Name) + ".tmp-" + hex.EncodeToString(b[:])
	file, err := f.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("write card: %w", err)
	}
	err = file.Chmod(0o600)
	if err == nil {
		_, err = file.Write(append(data, '\n'))
	}
	if err == nil {
		err = file.Sync()
	}
	if cerr := file.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = f.root.Rename(tmp, cardFile(c.Name))
	}
	if err != nil {
		_ = f.root.Remove(tmp)
		return fmt.Errorf("write card: %w", err)
	}
	if d, err := f.root.Open("."); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}

// read returns the card of worker name, a regular one-link file of at
// most maxCardBytes; os.ErrNotExist when there is none.
func (f *folder) read(name string) (Card, error) {
	file := cardFile(name)
	before, err := f.root.Lstat(file)
	if err != nil {
		return Card{}, err
	}
	if st, ok := before.Sys().(*syscall.Stat_t); !before.Mode().IsRegular() || (ok && st.Nlink != 1) {
		return Card{}, fmt.Errorf("read %s: %w", file, errUnsafe)
	}
	r, err := f.root.OpenFile(file, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return Card{}, err
	}
	defer r.Close()
	if now, err := r.Stat(); err != nil || !os.SameFile(before, now) {
		return Card{}, fmt.Errorf("read %s: %w", file, errUnsafe)
	}
	data, err := io.ReadAll(io.LimitReader(r, maxCardBytes+1))
	if err != nil {
		return Card{}, err
	}
	if len(data) > maxCardBytes {
		return Card{}, fmt.Errorf("read %s: over %d bytes", file, maxCardBytes)
	}
	return parseCard(name, data)
}

// entry is a card file (name set) or a leftover temp file of the folder.
type entry struct {
	name, file string
	temp       bool
	mod        time.Time
}

// limits bound one listing of the folder, which any process that can
// write it fills: cards is how many card files (and, apart, temp files)
// are kept; scan how many names are read in all. Other names are skipped
// unopened.
type limits struct{ cards, scan int }

// list returns the card and temp files of the folder within lim, reading
// 256 names at a time; truncated says a bound was hit.
func (f *folder) list(lim limits) (out []entry, truncated bool, err error) {
	d, err := f.root.Open(".")
	if err != nil {
		return nil, false, err
	}
	defer d.Close()
	kept := map[bool]int{} // card files and temp files
	for scanned := 0; ; {
		if scanned >= lim.scan {
			// Stopped at the bound: truncated unless the folder ends here.
			more, err := d.ReadDir(1)
			return out, truncated || len(more) > 0 || (err != nil && !errors.Is(err, io.EOF)), nil
		}
		des, err := d.ReadDir(min(256, lim.scan-scanned))
		scanned += len(des)
		for _, de := range des {
			n := de.Name()
			e := entry{file: n}
			switch {
			case strings.HasPrefix(n, ".") && strings.Contains(n, ".json.tmp-"):
				e.temp = true
			case strings.HasSuffix(n, ".json") && namePattern.MatchString(strings.TrimSuffix(n, ".json")):
				e.name = strings.TrimSuffix(n, ".json")
			default:
				continue
			}
			if kept[e.temp] >= lim.cards {
				truncated = true
				continue
			}
			kept[e.temp]++
			if info, err := de.Info(); err == nil {
				e.mod = info.ModTime()
			}
			out = append(out, e)
		}
		if errors.Is(err, io.EOF) || (err == nil && len(des) == 0) {
			return out, truncated, nil
		}
		if err != nil {
			return nil, false, err
		}
	}
}

// remove deletes a file of the folder; a missing one is no error.
func (f *folder) remove(file string) error {
	if err := f.root.Remove(file); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}
