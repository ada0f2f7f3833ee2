package recorder

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

// quarantineFolder is where unreadable files are set aside instead of
// deleted: history/<cluster>/quarantine/ (sealed files) and
// {Dir}/recorder/quarantine/ (unrecoverable live files). Nothing looks
// inside, nothing there is budgeted; each is logged once
// (recorder_quarantined).
const quarantineFolder = "quarantine"

// quarantineDetail ends every recorder_quarantined line.
const quarantineDetail = "kept for inspection, outside history, traces, archives and history.max_bytes; remove it when done"

// quarantineShared moves the sealed file f of hist, with its .meta.json,
// to the quarantine folder and logs recorder_quarantined with the cause. A
// file that cannot be moved stays, with a throttled warning.
func (r *Recorder) quarantineShared(hist *dir, f histFile, cause error) {
	base := f.segs[len(f.segs)-1]
	q, err := r.openShared(true, false, append(r.histSegs(), quarantineFolder)...)
	if err == nil {
		defer q.close()
		dst := freeName(q.exists, base)
		if err = hist.rename(base, q, dst); err == nil {
			for _, s := range sidecarsOf(base) {
				if hist.exists(s) {
					hist.rename(s, q, dst+s[len(base):])
				}
			}
			q.sync()
			hist.sync()
			r.log.Warn("recorder_quarantined", "file", q.rel+"/"+dst, "from", f.rel, "reason", cause.Error(),
				"saved_rows", 0, "detail", quarantineDetail)
			return
		}
	}
	r.warnEvery("recorder_quarantine_failed", f.rel, "file", f.rel, "reason", cause.Error(), "error", err)
}

// freeName is name, or name.1, name.2, ... when taken.
func freeName(exists func(string) bool, name string) string {
	out := name
	for i := 1; exists(out); i++ {
		out = name + "." + strconv.Itoa(i)
	}
	return out
}

// quarantineLive moves (with keepOriginal, copies) the live file name of
// {Dir}/recorder with its WAL to the quarantine folder and returns the
// quarantined path relative to storage.dir. A non-regular entry is moved.
func (r *Recorder) quarantineLive(name string, keepOriginal bool) (string, error) {
	qdir := filepath.Join(r.liveDir, quarantineFolder)
	if err := mkdirPrivate(qdir); err != nil {
		return "", err
	}
	dst := freeName(func(n string) bool {
		_, err := os.Lstat(filepath.Join(qdir, n))
		return err == nil
	}, name)
	rel := filepath.ToSlash(filepath.Join("recorder", quarantineFolder, dst))
	for _, suffix := range []string{"", "-wal"} {
		src := filepath.Join(r.liveDir, name+suffix)
		if _, err := os.Lstat(src); suffix != "" && errors.Is(err, os.ErrNotExist) {
			continue
		}
		var err error
		if keepOriginal {
			err = copyPrivate(src, filepath.Join(qdir, dst+suffix))
		} else {
			err = os.Rename(src, filepath.Join(qdir, dst+suffix))
		}
		if err != nil {
			return rel, fmt.Errorf("quarantine %s: %w", name+suffix, err)
		}
	}
	if !keepOriginal {
		os.Remove(filepath.Join(r.liveDir, name+"-shm"))
	}
	return rel, nil
}

// copyPrivate copies the regular file src to a new 0600 file dst.
func copyPrivate(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, fileMode)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	err = closeFile(out, err, true)
	if err != nil {
		os.Remove(dst)
	}
	return err
}

// badFiles remembers sealed files SQLite found unreadable, while their size
// and mtime stay the same, so traces skip them after one warning. When
// full it forgets them all.
type badFiles struct {
	mu    sync.Mutex
	files map[string]fileStamp
}

// fileStamp identifies a version of a file: replacing it changes both.
type fileStamp struct {
	size    int64
	modTime time.Time
}

func stampOf(f histFile) fileStamp { return fileStamp{f.size, f.modTime} }

// of reports whether f is still the version s was taken of.
func (s fileStamp) of(f histFile) bool { return s.size == f.size && s.modTime.Equal(f.modTime) }

const maxBadFiles = 256

// known reports whether f was found unreadable and is unchanged since.
func (b *badFiles) known(f histFile) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	st, ok := b.files[f.path]
	return ok && st.of(f)
}

func (b *badFiles) add(f histFile) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.files == nil || len(b.files) >= maxBadFiles {
		b.files = map[string]fileStamp{}
	}
	b.files[f.path] = stampOf(f)
}
