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
// The folder layout, file names, schema, .meta.json, life cycle of live,
// sealed, archived and merged files, retention and quarantine are
// specified in docs/storage-format.md; the operator's view (memory-only
// mode, disk budget, metrics) in docs/operations.md. A successful
// first-attempt task is stored as one task row, its lifecycle events
// folded into sum_* columns (summary.go).
//
// Security invariant: no folder or file below the shared root may be a
// symlink or have more than one hard link. Every operation there walks from
// the root with O_NOFOLLOW and works through the open folder (safefs.go),
// SQLite reads shared files through a read-only VFS serving the checked
// descriptor (filevfs.go), databases are built in a private folder before
// they are moved in, and what is read from peers' files is bounded
// (gzcache.go). Only history/<cluster>/<name>.db, history/<cluster>/<name>.db.gz
// (download only) and merged/<name>.db are ever served or merged by path.
package recorder
