package recorder

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"svc/worker/event"
)

// Open validates cfg, prepares storage.dir (created 0700), locks the
// worker's files there, seals live files a crashed run left, turns a
// leftover watchdog file into a crash_detected event and creates the live
// file. It starts no goroutines; call Run. Another live process of the
// same worker gives ErrInUse. A storage.dir that cannot hold the live file
// gives memory-only mode with the WARN recorder_memory_only_fallback.
func Open(ctx context.Context, cfg Config) (*Recorder, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	r := &Recorder{
		cfg:     cfg,
		log:     cfg.Logger.With("component", "recorder"),
		memory:  cfg.Dir == "",
		wake:    make(chan struct{}, 1),
		sealReq: make(chan chan error),
		sum:     &summarizer{on: !cfg.FullDetail, sampleAbove: cfg.SampleAbove, pending: map[string]*pendingTask{}, held: map[string]*heldRow{}},
		nextID:  cfg.StartedAt.UnixMilli() * 1000,

		// A part takes at most a quarter of the budget: a fold never needs more room.
		partBytes: min(archivePartBytes, max(cfg.MaxBytes/4, 1<<20)),
	}
	r.counts.sinceMs = cfg.Now().UnixMilli()
	if !r.memory {
		if err := r.openOwn(); errors.Is(err, ErrInUse) {
			return nil, fmt.Errorf("open recorder: %w", err)
		} else if err != nil {
			r.fallBack(err, nil)
		}
	}
	if err := r.openSharedRoot(); err != nil {
		r.own.release()
		return nil, fmt.Errorf("open recorder: %w", err)
	}
	if !r.memory {
		crash := r.takeWatchdog()
		if err := r.openLiveAtStart(ctx, crash); err != nil {
			r.fallBack(err, crash)
		}
	}
	if r.memory && r.ring == nil {
		r.ring = newRing(cfg.MemoryEvents)
	}
	// liveDir is "" in memory mode, which puts the cache in os.TempDir().
	r.gz = newGzCache(r.liveDir, ".gzcache-"+cfg.Worker+"-")
	return r, nil
}

// openOwn prepares storage.dir and its recorder/ folder and takes the
// worker's lock.
func (r *Recorder) openOwn() error {
	var err error
	if r.ownDir, err = prepareDir(r.cfg.Dir); err != nil {
		return err
	}
	if r.own, err = takeOwnLock(r.ownDir, r.cfg.Worker, r.cfg.StartedAt.UnixMilli()); err != nil {
		return err
	}
	r.liveDir = filepath.Join(r.ownDir, "recorder")
	if fi, err := os.Lstat(r.liveDir); err == nil && !fi.IsDir() {
		return fmt.Errorf("prepare %s: %w", r.liveDir, ErrUnsafePath)
	}
	return mkdirPrivate(r.liveDir)
}

// openSharedRoot resolves the shared root: shared.dir, else storage.dir
// (none when that proved unusable).
func (r *Recorder) openSharedRoot() error {
	shared := r.cfg.SharedDir
	if shared == "" {
		shared = r.cfg.Dir
	}
	if shared == "" {
		return nil
	}
	root, err := prepareDir(shared)
	if err != nil {
		if r.cfg.SharedDir == "" && r.fellBack {
			return nil
		}
		return err
	}
	r.sharedRoot = root
	if r.ownDir != "" && r.ownDir != r.sharedRoot && within(r.ownDir, r.sharedRoot) {
		if r.ownDirInfo, err = os.Stat(r.ownDir); err != nil {
			return err
		}
	}
	return nil
}

// openLiveAtStart seals orphaned live files, opens the live file and
// records the crash of the previous run, if any.
func (r *Recorder) openLiveAtStart(ctx context.Context, crash json.RawMessage) error {
	maxID, err := r.recoverOrphans(ctx)
	if err != nil {
		return err
	}
	if maxID >= r.nextID {
		r.nextID = maxID + 1
	}
	if err := r.openLive(ctx, r.cfg.StartedAt.UnixMilli()); err != nil {
		return err
	}
	if crash != nil {
		ev := r.fillEvent(event.Event{Type: event.TypeCrashDetected, Payload: crash})
		ev.ID = r.nextID
		r.nextID++
		if err := r.insertItems(ctx, []item{{ev: &ev}}); err != nil {
			return fmt.Errorf("record crash: %w", err)
		}
		r.stats.eventsWritten.Add(1)
		r.log.Warn("crash_detected", "previous", string(crash))
	}
	return nil
}

// fallBack turns a recorder whose storage.dir proved unusable into a
// memory-only one, loudly, keeping a crash found before in the ring.
func (r *Recorder) fallBack(cause error, crash json.RawMessage) {
	r.liveMu.Lock()
	if r.live != nil {
		r.live.close()
		removeDB(r.live.path)
		r.live = nil
	}
	r.liveMu.Unlock()
	r.own.release()
	r.own = nil
	r.memory, r.fellBack, r.liveDir = true, true, ""
	r.ring = newRing(r.cfg.MemoryEvents)
	r.log.Warn("recorder_memory_only_fallback", "dir", r.cfg.Dir, "error", cause.Error(),
		"detail", "storage.dir cannot hold the flight recorder's live file: recent events and task rows are kept in memory only, nothing is sealed, there is no watchdog file")
	if crash != nil {
		ev := r.fillEvent(event.Event{Type: event.TypeCrashDetected, Payload: crash})
		ev.ID = r.nextID
		r.nextID++
		r.ring.addEvent(ev)
		r.stats.eventsWritten.Add(1)
		r.log.Warn("crash_detected", "previous", string(crash))
	}
}

// MemoryOnly reports whether the recorder keeps events in memory only
// (storage.dir empty or unusable at Open).
func (r *Recorder) MemoryOnly() bool { return r.memory }

// prepareDir creates dir (0700) when missing and returns its absolute path
// with symlinks resolved.
func prepareDir(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("resolve %s: %w", dir, err)
	}
	if err := mkdirPrivate(abs); err != nil {
		return "", err
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", fmt.Errorf("resolve %s: %w", dir, err)
	}
	return real, nil
}
