// Package cache is the handler cache: a last-write-wins key/value store
// for handler code, and its exchange between the workers of a fleet.
//
// # Rows
//
// A row is (scope, key) → value, with the time it was written and the
// worker that wrote it (its origin). Each scope is its own key space:
// "local" rows stay on their worker, "cluster" rows travel to the workers
// of the same worker.cluster, "global" rows to every worker. Two rows of
// one (scope, key) are merged by last write wins: the higher timestamp,
// then the higher origin name; an equal pair keeps the row held.
//
// A local write takes the wall clock in milliseconds, or one more than the
// newest timestamp this worker gave or the row it replaces holds,
// whichever is highest. So a write always replaces what its worker held,
// and the timestamps of one worker's own rows rise strictly: they are the
// cursor of the peer route and the marks on the worker's card.
//
// # Files
//
// Store keeps the rows in {storage.dir}/{worker}.cache.db (SQLite, WAL,
// mode 0600), never in the shared folder. With storage.dir empty, or a
// folder that cannot hold the file, the rows live in memory only and the
// exchange is off.
//
// # Exchange
//
// Each worker serves the cluster and global rows it originated at
// GET /api/v1/peer/cache/changes (Store.Changes), and pulls those of the
// peers its registry lists (Exchange): static peers every cycle, cards
// only when their marks moved. Rows are applied only when their origin is
// the peer pulled and their scope one it was asked for. A row stamped
// more than MaxFutureSkew ahead of this worker's clock is stamped now +
// MaxFutureSkew when received: since a local write is stamped after the
// row it replaces, an unbounded stamp would drag every later local write
// as far ahead.
//
// # Tasks
//
// Tasks joins the cache to executor runs: before a run the keys named in
// handler.cache_keys become SVC_CACHE_<NAME> variables, after it the
// executor's fd 3 cache writes are stored.
package cache
