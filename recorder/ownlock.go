package recorder

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// ErrInUse: another live process of the same worker holds the worker's
// files in storage.dir (its <worker>.lock). Open refuses rather than seal
// that process's live file, delete its watchdog or report a false crash.
var ErrInUse = errors.New("recorder: worker files are in use by another process")

// ownLock is {storage.dir}/<worker>.lock, held with an exclusive flock for
// the life of the recorder. The kernel releases it when the process dies,
// however it dies, so a crashed run never blocks the next one. The file is
// never deleted (deleting a lock file races with a process about to lock
// it); it holds the holder's {"pid","started_ms"} for the error message.
type ownLock struct {
	f *os.File
}

// ownLockInfo is the lock file's JSON.
type ownLockInfo struct {
	PID       int   `json:"pid"`
	StartedMs int64 `json:"started_ms"`
}

// takeOwnLock locks {dir}/<worker>.lock. A lock held by another process
// (or another Recorder of this process) gives ErrInUse naming its PID.
func takeOwnLock(dir, worker string, startedMs int64) (*ownLock, error) {
	path := filepath.Join(dir, worker+".lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, fileMode)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder := lockHolder(f)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("lock %s: %w: worker %q is running as pid %s; stop it, or give this process another worker name or storage.dir",
				path, ErrInUse, worker, holder)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	// The PID is informative only: a full disk must not fail the lock.
	data, _ := json.Marshal(ownLockInfo{PID: os.Getpid(), StartedMs: startedMs})
	if f.Chmod(fileMode) == nil && f.Truncate(0) == nil {
		if _, err := f.WriteAt(data, 0); err == nil {
			f.Sync()
		}
	}
	return &ownLock{f: f}, nil
}

// lockHolder reads the PID a lock file names, "unknown" when it cannot.
func lockHolder(f *os.File) string {
	data, err := io.ReadAll(io.LimitReader(f, 4096))
	var info ownLockInfo
	if err != nil || json.Unmarshal(data, &info) != nil || info.PID <= 0 {
		return "unknown"
	}
	return strconv.Itoa(info.PID)
}

// release unlocks and closes the lock file. Safe on nil.
func (l *ownLock) release() {
	if l == nil || l.f == nil {
		return
	}
	syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	l.f.Close()
	l.f = nil
}
