// Package recorder is the worker's flight recorder: it stores pipeline
// events and task results in SQLite files, seals them into a folder the
// fleet shares, folds old files into compressed archives, and answers the
// event, trace, database, download and merge queries of the operator API.
//
// Concurrency: Event and Task never block (a full write queue drops and
// counts); one goroutine started by Run owns the live file's writes; the
// query methods may run concurrently with everything. Open starts nothing.
//
// # On-disk format (version 1)
//
// Any implementation that follows this layout can share the folder; docs/storage-format.md
// has the same rules with the full schema. Times are decimal epoch
// milliseconds (UTC). Worker and cluster names are 1-128 bytes of
// [A-Za-z0-9._-] not starting with '.'. Names starting with '.' are temp,
// lock or cache files: listings skip them and they are never served. No file
// stores an absolute path; paths inside files and in the API are relative to
// shared.dir, slash-separated.
//
// storage.dir (private to one worker; created 0700 when missing):
//
//	recorder/                              0700
//	recorder/<worker>-<start_ms>.db        live file: SQLite, WAL, busy timeout, 0600
//	recorder/quarantine/                   0700: a dead run's live files that could not be recovered in full
//	<worker>.watchdog                      {"pid","rss_bytes","ts_ms"}, rewritten every few seconds, 0600
//	<worker>.lock                          {"pid","started_ms"}, flock held while running, never deleted
//
// shared.dir (storage.dir when unset; folders created 0700, files 0600):
//
//	history/<cluster>/<worker>-<from_ms>-<to_ms>.db            sealed file
//	history/<cluster>/<worker>-<from_ms>-<to_ms>.db.meta.json  its metadata
//	history/<cluster>/<cluster>-<window_start_ms>.db.gz        archive (gzip of a SQLite file), first part
//	history/<cluster>/<cluster>-<window_start_ms>-<n>.db.gz    next parts of the window (n = 1, 2, ...)
//	history/<cluster>/<cluster>-<window_start_ms>[-<n>].db.gz.meta.json
//	history/<cluster>/<cluster>-<window_start_ms>[-<n>].db.gz.idx  task ids and labels it holds (optional)
//	history/<cluster>/.archive.lock                            archiving lease
//	history/<cluster>/quarantine/                              sealed files no reader can open (0700)
//	merged/merged-<ts_ms>-<token>.db                           merge result (token: 16 hex digits)
//	merged/merged-<ts_ms>-<token>.db.meta.json
//
// No folder or file below the shared root may be a symlink and no file may
// have more than one hard link: every operation there walks from the root
// with O_NOFOLLOW and works through the open folder (openat, renameat,
// unlinkat), SQLite reads shared files through a read-only VFS serving the
// descriptor that was checked, and databases are built in a private folder
// before they are moved in. What is read from peers' files is bounded
// (archives inflate to the size their SQLite header declares, at most 1 GiB
// for a trace or a fold). An archive a trace cannot read is
// refused once and remembered while its size and mtime stay the same.
//
// Every database file has the same schema (PRAGMA user_version 1; a file
// of another version is refused): meta(key, value); events(id, ts_ms,
// type, kind, task_id, worker, labels JSON, payload JSON) indexed on task_id
// and type; tasks(id, task_id, ts_ms, worker, source, alias, partition,
// offset, key, labels JSON, status, attempts, duration_ms, error,
// output_size_bytes, env JSON, then the sum_* columns of a summarized task)
// indexed on task_id; task_labels(name, value, task_id, ts_ms) indexed on
// (name, value, ts_ms); config_snapshots(id, ts_ms, config);
// state_timeline(id, ts_ms, state, detail); sources(name). meta holds format
// ("1"), kind (live, sealed, archive, merged), worker, cluster, from_ms,
// to_ms (0 while live); archives add window_start_ms and window_ms.
//
// A task that succeeded at its first attempt is one task row: its
// task_received, executor_started and executor_finished events, and the
// annotations and deliveries that come with it, are folded into the row's
// sum_* columns and rebuilt by readers (summary.go); every other event is an
// events row.
//
// Each .meta.json is {"kind","worker","cluster","from_ms","to_ms","events",
// "tasks","format"} plus "sources" for archives (folded file names) and merge
// results (the merged paths), and "inflated_bytes" for archives. It is written before its database appears.
//
// Life cycle:
//
//   - Live: the worker appends to its live file. In live and sealed files,
//     events.id is the worker's event ID (increasing; seeded from the start
//     time times 1000); in archives and merge results ids are file-local.
//   - Seal (every seal interval, as soon as the live file and its WAL
//     outgrow LiveMaxBytes, checked after every write transaction, and at
//     shutdown): checkpoint the WAL
//     (wal_checkpoint(TRUNCATE)), switch to journal_mode=DELETE, set meta
//     kind=sealed and to_ms, close; move the file to a hidden temp name in
//     history/<cluster>/, fsync, write the .meta.json, rename to its final
//     name; start a new live file whose start_ms is the old to_ms. A live
//     file without events and task rows is not sealed: it keeps recording,
//     and at shutdown it is deleted. A live file left by a dead process is
//     sealed at the next start, its to_ms being its newest row; when its
//     WAL is damaged (committed frames SQLite would not replay) it is
//     first copied with the WAL to recorder/quarantine/, and a file SQLite
//     cannot open, or a non-file under a live file's name, is moved there
//     (quarantine.go, wal.go).
//   - Archive (when enabled, a pass every quarter window or half
//     archive.after, whichever is shorter): a sealed file whose to_ms is
//     older than archive.after is folded into an archive part of window
//     floor(from_ms / window) * window, parts holding up to 128 MiB
//     inflated: decompress the newest part (when its .meta.json says
//     inflated_bytes and the files fit) to a hidden temp file, or start a
//     new part (from a copy of the first sealed file when its schema is
//     exactly ours), copy the rows in (skipping a file already named in
//     sources), gzip (level 2) to a hidden temp file, fsync, write the
//     .meta.json and the .idx (fingerprints of the task ids and labels,
//     tied to the archive's size and gzip trailer: traces skip the parts
//     whose index rules them out), rename over or in as the part, then
//     delete the sealed files and their .meta.json. A pass uses at most half a core over time. Only the holder of
//     .archive.lock archives: the lock is created with O_EXCL and holds
//     {"worker","token","expires_ms"} (lease 10 minutes, refreshed before each
//     part). An expired lock is renamed aside to a unique hidden name and
//     taken over only if the renamed content is still the expired one.
//   - Merge: copies all rows of the given sealed or merged files into a new
//     merged file. While archiving is enabled, merge results older than
//     merged_retention_days (by the <ts_ms> in the name) are deleted.
//   - Retention (when archiving is enabled): the lock holder deletes the
//     windows whose newest to_ms is older than MaxAge before folding, never
//     a window that ends after now - seal interval - 1 minute (a live file
//     may still be sealed into it). The oldest files (sealed files and
//     archive parts, by newest row), whatever their window, are deleted
//     before a seal or an archive part would take the folder's sealed
//     files, archives and metadata past MaxBytes, and after each pass.
//     With archiving off nothing is ever deleted automatically.
//   - Quarantine: a sealed file SQLite finds corrupt is moved by the
//     archive pass to history/<cluster>/quarantine/ with its .meta.json;
//     nothing there is listed, traced, archived, served or budgeted.
//
// Open takes an exclusive flock on <worker>.lock, so a second process of the
// same worker on the same storage.dir is refused (ErrInUse, naming the PID)
// instead of sealing the first one's live file or reporting a false crash.
//
// Memory-only mode (storage.dir empty): recent events and task rows live in a
// ring, nothing is sealed, there is no watchdog file and no live file. A
// storage.dir that cannot hold the live file at Open (permission, read-only
// or full file system) gives the same mode with the WARN
// recorder_memory_only_fallback. A write that fails later (disk full) loses
// its batch: the rows are counted in Stats (EventsDropped, TasksDropped,
// RowsLost) and Counts (LostRows, Incomplete), and the error is logged once
// per episode and then at most every 30 seconds.
//
// Only three shapes are ever served or merged by path:
// history/<cluster>/<name>.db, history/<cluster>/<name>.db.gz (download only)
// and merged/<name>.db. Databases lists the live file as "live/<worker>", a
// marker no download accepts; SnapshotLive serves it.
package recorder
