// Package cache is the handler cache: a last-write-wins key/value store
// for handler code ({storage.dir}/{worker}.cache.db, SQLite, else memory
// only), and its exchange between the workers of a fleet. docs/api.md and
// docs/operations.md (Cache exchange) describe both as operators see them.
//
// A row is (scope, key) → value with its timestamp and origin worker;
// "local" rows stay on their worker, "cluster" rows travel within
// worker.cluster, "global" rows everywhere. Two rows of one (scope, key)
// merge by the higher timestamp, then the higher origin; an equal pair
// keeps the row held. A local write is stamped max(wall clock ms, newest
// own stamp + 1, replaced row + 1), so it always replaces what its worker
// held and a worker's own stamps rise strictly: they are the peer route's
// cursor and the card's marks. That is also why a pulled row is stamped at
// most MaxFutureSkew ahead: an unbounded stamp would drag every later
// local write as far ahead.
package cache
