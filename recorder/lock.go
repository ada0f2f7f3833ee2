package recorder

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// archiveLease is how long an archive lock stays valid without a refresh;
// the holder refreshes it before each window it folds.
const archiveLease = 10 * time.Minute

// archiveLock is history/<cluster>/.archive.lock, held by one worker of the
// fleet at a time.
type archiveLock struct {
	r     *Recorder
	path  string
	token string
}

// lockContent is the lock file's JSON.
type lockContent struct {
	Worker    string `json:"worker"`
	Token     string `json:"token"`
	ExpiresMs int64  `json:"expires_ms"`
}

// acquireArchiveLock takes the cluster's archive lock. It returns nil and no
// error when another worker holds a valid lease. A lock whose lease expired
// (or that is unreadable and older than a lease) is taken over: it is renamed
// aside under a unique name, and the takeover counts only if the renamed
// file is still the stale one, so two workers cannot both take it over.
func (r *Recorder) acquireArchiveLock() (*archiveLock, error) {
	if err := mkdirPrivate(r.historyDir); err != nil {
		return nil, err
	}
	l := &archiveLock{r: r, path: filepath.Join(r.historyDir, ".archive.lock"), token: randToken(8)}
	for attempt := 0; attempt < 2; attempt++ {
		ok, err := l.create()
		if err != nil {
			return nil, err
		}
		if ok {
			return l, nil
		}
		old, err := os.ReadFile(l.path)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil || !l.stale(old) {
			return nil, err
		}
		aside := l.path + "." + l.token + ".stale"
		if err := os.Rename(l.path, aside); err != nil {
			return nil, nil // someone else moved it first
		}
		got, _ := os.ReadFile(aside)
		if !bytes.Equal(got, old) {
			// We moved a fresh lock another worker had just taken: put it back.
			os.Link(aside, l.path)
			os.Remove(aside)
			return nil, nil
		}
		os.Remove(aside)
		r.log.Warn("recorder_archive_lock_taken_over", "previous", string(old))
	}
	return nil, nil
}

// create makes the lock file with O_EXCL; false when it exists.
func (l *archiveLock) create() (bool, error) {
	f, err := os.OpenFile(l.path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, fileMode)
	if errors.Is(err, os.ErrExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("create archive lock: %w", err)
	}
	_, err = f.Write(l.content())
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(l.path)
		return false, fmt.Errorf("write archive lock: %w", err)
	}
	return true, nil
}

func (l *archiveLock) content() []byte {
	data, _ := json.Marshal(lockContent{Worker: l.r.cfg.Worker, Token: l.token,
		ExpiresMs: l.r.cfg.Now().Add(archiveLease).UnixMilli()})
	return data
}

// stale reports whether lock content data has expired. Content that does
// not parse (a holder mid-write, or a foreign format) is judged by the
// file's age instead.
func (l *archiveLock) stale(data []byte) bool {
	var c lockContent
	if json.Unmarshal(data, &c) == nil && c.ExpiresMs > 0 {
		return c.ExpiresMs < l.r.cfg.Now().UnixMilli()
	}
	fi, err := os.Stat(l.path)
	return err == nil && l.r.cfg.Now().Sub(fi.ModTime()) > archiveLease
}

// held reports whether the lock file still carries our token.
func (l *archiveLock) held() bool {
	data, err := os.ReadFile(l.path)
	if err != nil {
		return false
	}
	var c lockContent
	return json.Unmarshal(data, &c) == nil && c.Token == l.token
}

// refresh extends the lease; false when the lock was lost.
func (l *archiveLock) refresh() bool {
	if !l.held() {
		return false
	}
	return writeFileAtomic(l.path, l.content()) == nil
}

// release removes the lock if it is still ours.
func (l *archiveLock) release() {
	if l.held() {
		os.Remove(l.path)
	}
}
