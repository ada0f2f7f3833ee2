package recorder

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"
)

// archiveLease is how long an archive lock stays valid without a refresh;
// the holder refreshes it before each window it folds.
const archiveLease = 10 * time.Minute

// lockName is the archive lock's file name in history/<cluster>/.
const lockName = ".archive.lock"

// maxLockBytes bounds a lock file read (it is a peer's file).
const maxLockBytes = 4096

// archiveLock is history/<cluster>/.archive.lock, held by one worker of the
// fleet at a time. dir is the history folder it lives in, opened without
// symlinks; the fold works through the same open folder.
type archiveLock struct {
	r     *Recorder
	dir   *dir
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
	d, err := r.openShared(true, false, r.histSegs()...)
	if err != nil {
		return nil, fmt.Errorf("archive lock: %w", err)
	}
	l := &archiveLock{r: r, dir: d, token: randToken(8)}
	got, err := l.acquire()
	if err != nil || !got {
		d.close()
		return nil, err
	}
	return l, nil
}

func (l *archiveLock) acquire() (bool, error) {
	for attempt := 0; attempt < 2; attempt++ {
		ok, err := l.create()
		if err != nil || ok {
			return ok, err
		}
		old, err := l.dir.readSmall(lockName, maxLockBytes)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil || !l.stale(old) {
			return false, err
		}
		aside := lockName + "." + l.token + ".stale"
		if err := l.dir.rename(lockName, l.dir, aside); err != nil {
			return false, nil // someone else moved it first
		}
		got, _ := l.dir.readSmall(aside, maxLockBytes)
		if !bytes.Equal(got, old) {
			// We moved a fresh lock another worker had just taken: put it back.
			l.dir.link(aside, lockName)
			l.dir.remove(aside)
			return false, nil
		}
		l.dir.remove(aside)
		l.r.log.Warn("recorder_archive_lock_taken_over", "previous", string(old))
	}
	return false, nil
}

// create makes the lock file with O_EXCL; false when it exists.
func (l *archiveLock) create() (bool, error) {
	f, err := l.dir.create(lockName)
	if errors.Is(err, os.ErrExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("create archive lock: %w", err)
	}
	_, err = f.Write(l.content())
	err = closeFile(f, err, true)
	if err != nil {
		l.dir.remove(lockName)
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
	fi, err := l.dir.stat(lockName)
	return err == nil && l.r.cfg.Now().Sub(fi.ModTime()) > archiveLease
}

// held reports whether the lock file still carries our token.
func (l *archiveLock) held() bool {
	data, err := l.dir.readSmall(lockName, maxLockBytes)
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
	return l.dir.writeAtomic(lockName, l.content()) == nil
}

// release removes the lock if it is still ours and closes its folder.
func (l *archiveLock) release() {
	if l.held() {
		l.dir.remove(lockName)
	}
	l.dir.close()
}
