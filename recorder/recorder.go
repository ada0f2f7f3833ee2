package recorder

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"svc/worker/event"
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
	// queue is the write queue (Config.BufferSize items at most), in ID
	// order; guarded by inMu (a slice, not a channel: enqueue holds inMu
	// anyway). queued mirrors its length for lock-free checks; wake
	// (capacity 1) tells the writer it became non-empty.
	queue       []item
	queued      atomic.Int64
	wake        chan struct{}
	lingerT     *time.Timer  // the writer's linger timer (writer only)
	over        overflow     // behind a full queue (overflow.go); guarded by inMu
	overN       atomic.Int64 // len(over.items), for the writer's check without the lock
	overWriting atomic.Int64 // taken off the overflow list, not written yet

	liveMu sync.RWMutex
	live   *liveFile // nil in memory mode and after shutdown

	recentMu sync.Mutex
	recent   []string // this process's sealed files, newest first

	ring   *ring // memory mode only
	subs   subscribers
	counts counter
	gz     *gzCache

	bad       badFiles   // unreadable sealed files traces skip
	usage     usageState // see History
	partBytes int64      // archivePartBytes; tests make it smaller

	warnMu sync.Mutex
	warned map[string]time.Time // see warnEvery

	sealReq      chan chan error
	running      atomic.Bool
	shutdownOnce sync.Once
	shutdownErr  error
	stats        stats

	loss        lossEpisode  // see recordLoss
	liveRetryAt time.Time    // writer only: last attempt to recreate the live file
	sum         *summarizer  // writer only: lifecycle events waiting for their task row
	sealTick    *time.Ticker // writer only: the seal interval's ticker, restarted by a seal for size
	sizeSeal    struct {     // writer only: the last seal for size (see liveOverSize)
		gen int64 // the live file's liveFile.gen
		at  time.Time
	}
	liveGen int64 // the last liveFile.gen handed out (writer and Open only)

	own      *ownLock // {Dir}/<worker>.lock; nil in memory mode
	fellBack bool     // storage.dir was set but unusable: memory-only
}

// item is one queued write: exactly one field is set.
type item struct {
	ev   *event.Event
	task *event.TaskRow
	// sum stands for the task's folded events (summary.go); folded is how
	// many events it stands for, counted as written or lost with it.
	sum    *Summary
	folded int
	// sampled: counted but not stored (history.sample_above_per_second).
	sampled bool
}

// Close ends the recorder. Call it after Run has returned. When Run never
// ran it performs the same clean shutdown (seal, watchdog removal). It is
// safe to call more than once.
func (r *Recorder) Close() error {
	err := r.shutdown(context.Background())
	r.own.release()
	r.gz.close()
	r.vfs.close()
	r.removeScratch()
	return err
}

// Stats is a point-in-time copy of the recorder's counters, for metrics.
type Stats struct {
	EventsWritten     uint64 // events stored (live file or memory ring)
	TasksWritten      uint64 // task rows stored
	EventsDropped     uint64 // events not stored: write queue full or closed, or lost to a failed write
	TasksDropped      uint64 // task rows not stored, likewise
	RowsLost          uint64 // events and task rows lost to failed writes (disk full, I/O error); part of the two above
	SubscriberDrops   uint64 // items not delivered to slow live subscribers
	Subscribers       int    // current live subscribers
	Queued            int    // items waiting in the write queue and its overflow list
	Overflowed        uint64 // items that waited in the overflow list instead of being dropped
	WriteErrors       uint64 // failed write batches (their rows are in RowsLost)
	Seals             uint64 // live files sealed into history
	SealErrors        uint64
	ArchivedFiles     uint64 // sealed files folded into archives by this worker
	ArchiveErrors     uint64
	MergedRemoved     uint64 // merge results removed by retention
	DeletedAge        uint64 // sealed files and archives deleted past MaxAge
	DeletedBudget     uint64 // likewise, to keep the history within MaxBytes
	ArchiveInflations uint64 // archives decompressed (or begun to be) for traces
	ArchivesRefused   uint64 // archives refused by traces, each once while unchanged
	EventsSummarized  uint64 // events folded into their task row; part of EventsWritten
	TasksSampled      uint64 // task rows counted but not stored (sample_above_per_second)
	MemoryOnly        bool   // events are kept in memory only (see Recorder.MemoryOnly)
}

type stats struct {
	eventsWritten, tasksWritten, eventsDropped, tasksDropped atomic.Uint64
	overflowed                                               atomic.Uint64 // items that waited in the overflow list (overflow.go)
	writeErrors, rowsLost, seals, sealErrors                 atomic.Uint64
	archivedFiles, archiveErrors, mergedRemoved              atomic.Uint64
	deletedAge, deletedBudget                                atomic.Uint64
	archiveInflations, archivesRefused                       atomic.Uint64
	eventsSummarized, tasksSampled                           atomic.Uint64
}

// Stats returns the current counters.
func (r *Recorder) Stats() Stats {
	n, drops := r.subs.stats()
	return Stats{
		EventsWritten:     r.stats.eventsWritten.Load(),
		TasksWritten:      r.stats.tasksWritten.Load(),
		EventsDropped:     r.stats.eventsDropped.Load(),
		TasksDropped:      r.stats.tasksDropped.Load(),
		SubscriberDrops:   drops,
		Subscribers:       n,
		Queued:            int(r.queued.Load()) + int(r.overN.Load()) + int(r.overWriting.Load()),
		Overflowed:        r.stats.overflowed.Load(),
		RowsLost:          r.stats.rowsLost.Load(),
		WriteErrors:       r.stats.writeErrors.Load(),
		Seals:             r.stats.seals.Load(),
		SealErrors:        r.stats.sealErrors.Load(),
		ArchivedFiles:     r.stats.archivedFiles.Load(),
		ArchiveErrors:     r.stats.archiveErrors.Load(),
		MergedRemoved:     r.stats.mergedRemoved.Load(),
		DeletedAge:        r.stats.deletedAge.Load(),
		DeletedBudget:     r.stats.deletedBudget.Load(),
		ArchiveInflations: r.stats.archiveInflations.Load(),
		ArchivesRefused:   r.stats.archivesRefused.Load(),
		EventsSummarized:  r.stats.eventsSummarized.Load(),
		TasksSampled:      r.stats.tasksSampled.Load(),
		MemoryOnly:        r.memory,
	}
}

// removeIfExists removes path, ignoring a missing file.
func removeIfExists(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}
