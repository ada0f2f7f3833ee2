package recorder

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"
)

// Sentinel errors callers map to HTTP statuses.
var (
	// ErrNotFound: a download or merge path that is not one of the allowed
	// shapes (download only), is unsafe, crosses a symlink, resolves outside
	// the shared root, lies in storage.dir, or does not exist (404).
	ErrNotFound = errors.New("recorder: not found")
	// ErrBadShape: a merge path of a shape other than history/<cluster>/<name>.db
	// or merged/<name>.db, or an unsafe one (400).
	ErrBadShape = errors.New("recorder: bad path shape")
	// ErrNoLiveFile: memory-only mode has no live file to snapshot.
	ErrNoLiveFile = errors.New("recorder: no live file (memory-only mode)")
	// ErrNoSharedDir: neither shared.dir nor storage.dir is set, so there is
	// nowhere to write a merge result.
	ErrNoSharedDir = errors.New("recorder: no shared folder")
)

// Recorder is the flight recorder. Event, Task, ConfigSnapshot, State,
// Subscribe, Stats and the query methods are safe for concurrent use and may
// be called before, during and after Run. Event and Task never block.
type Recorder struct {
	cfg    Config
	log    *slog.Logger
	memory bool

	ownDir     string      // storage.dir with symlinks resolved; "" in memory mode
	liveDir    string      // {ownDir}/recorder
	sharedRoot string      // shared root with symlinks resolved; "" when none
	ownDirInfo os.FileInfo // ownDir when it lies strictly inside sharedRoot: never served

	vfs         fileVFS // lends checked shared-folder files to SQLite
	scratchMu   sync.Mutex
	scratchDir  string // private folder for build files; see scratch
	scratchTemp bool   // scratchDir is a temp folder Close removes

	// inMu covers ID assignment together with the enqueue, so the writer
	// inserts events in ID order.
	inMu    sync.Mutex
	nextID  int64
	stopped bool
	in      chan item

	liveMu sync.RWMutex
	live   *liveFile // nil in memory mode and after shutdown

	recentMu sync.Mutex
	recent   []string // this process's sealed files, newest first

	ring   *ring // memory mode only
	subs   subscribers
	counts counter
	gz     *gzCache

	warnMu sync.Mutex
	warned map[string]time.Time // see warnEvery

	sealReq      chan chan error
	running      atomic.Bool
	shutdownOnce sync.Once
	shutdownErr  error
	stats        stats
}

// item is one queued write: exactly one field is set.
type item struct {
	ev   *Event
	task *TaskRow
}

// Open validates cfg, prepares storage.dir (created 0700 when missing) and
// the live file, seals live files an earlier crashed run of this worker left
// behind, and turns a leftover watchdog file into a crash_detected event.
// It starts no goroutines; call Run.
func Open(ctx context.Context, cfg Config) (*Recorder, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	r := &Recorder{
		cfg:     cfg,
		log:     cfg.Logger.With("component", "recorder"),
		memory:  cfg.Dir == "",
		in:      make(chan item, cfg.BufferSize),
		sealReq: make(chan chan error),
		nextID:  cfg.StartedAt.UnixMilli() * 1000,
	}
	r.counts.sinceMs = cfg.Now().UnixMilli()
	if !r.memory {
		if r.ownDir, err = prepareDir(cfg.Dir); err != nil {
			return nil, fmt.Errorf("open recorder: %w", err)
		}
		r.liveDir = filepath.Join(r.ownDir, "recorder")
		if err := mkdirPrivate(r.liveDir); err != nil {
			return nil, fmt.Errorf("open recorder: %w", err)
		}
	} else {
		r.ring = newRing(cfg.MemoryEvents)
	}
	// liveDir is "" in memory mode, which puts the cache in os.TempDir().
	r.gz = newGzCache(r.liveDir, ".gzcache-"+cfg.Worker+"-")
	shared := cfg.SharedDir
	if shared == "" {
		shared = cfg.Dir
	}
	if shared != "" {
		if r.sharedRoot, err = prepareDir(shared); err != nil {
			return nil, fmt.Errorf("open recorder: %w", err)
		}
		if r.ownDir != "" && r.ownDir != r.sharedRoot && within(r.ownDir, r.sharedRoot) {
			if r.ownDirInfo, err = os.Stat(r.ownDir); err != nil {
				return nil, fmt.Errorf("open recorder: %w", err)
			}
		}
	}
	if r.memory {
		return r, nil
	}
	crash := r.takeWatchdog()
	maxID, err := r.recoverOrphans(ctx)
	if err != nil {
		return nil, fmt.Errorf("open recorder: %w", err)
	}
	if maxID >= r.nextID {
		r.nextID = maxID + 1
	}
	if err := r.openLive(ctx, cfg.StartedAt.UnixMilli()); err != nil {
		return nil, fmt.Errorf("open recorder: %w", err)
	}
	if crash != nil {
		ev := r.fillEvent(Event{Type: TypeCrashDetected, Payload: crash})
		ev.ID = r.nextID
		r.nextID++
		if err := r.writeBatch(ctx, []item{{ev: &ev}}); err != nil {
			r.closeLive()
			return nil, fmt.Errorf("open recorder: record crash: %w", err)
		}
		r.log.Warn("crash_detected", "previous", string(crash))
	}
	return r, nil
}

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

// Close ends the recorder. Call it after Run has returned. When Run never
// ran it performs the same clean shutdown (seal, watchdog removal). It is
// safe to call more than once.
func (r *Recorder) Close() error {
	err := r.shutdown(context.Background())
	r.gz.close()
	r.vfs.close()
	r.removeScratch()
	return err
}

// Stats is a point-in-time copy of the recorder's counters, for metrics.
type Stats struct {
	EventsWritten   uint64 // events stored (live file or memory ring)
	TasksWritten    uint64 // task rows stored
	EventsDropped   uint64 // events dropped because the write queue was full or closed
	TasksDropped    uint64 // task rows dropped likewise
	SubscriberDrops uint64 // items not delivered to slow live subscribers
	Subscribers     int    // current live subscribers
	Queued          int    // items waiting in the write queue
	WriteErrors     uint64 // failed write batches (their rows are lost)
	Seals           uint64 // live files sealed into history
	SealErrors      uint64
	ArchivedFiles   uint64 // sealed files folded into archives by this worker
	ArchiveErrors   uint64
	MergedRemoved   uint64 // merge results removed by retention
}

type stats struct {
	eventsWritten, tasksWritten, eventsDropped, tasksDropped atomic.Uint64
	writeErrors, seals, sealErrors                           atomic.Uint64
	archivedFiles, archiveErrors, mergedRemoved              atomic.Uint64
}

// Stats returns the current counters.
func (r *Recorder) Stats() Stats {
	n, drops := r.subs.stats()
	return Stats{
		EventsWritten:   r.stats.eventsWritten.Load(),
		TasksWritten:    r.stats.tasksWritten.Load(),
		EventsDropped:   r.stats.eventsDropped.Load(),
		TasksDropped:    r.stats.tasksDropped.Load(),
		SubscriberDrops: drops,
		Subscribers:     n,
		Queued:          len(r.in),
		WriteErrors:     r.stats.writeErrors.Load(),
		Seals:           r.stats.seals.Load(),
		SealErrors:      r.stats.sealErrors.Load(),
		ArchivedFiles:   r.stats.archivedFiles.Load(),
		ArchiveErrors:   r.stats.archiveErrors.Load(),
		MergedRemoved:   r.stats.mergedRemoved.Load(),
	}
}

// removeIfExists removes path, ignoring a missing file.
func removeIfExists(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}
