package httpd

import (
	"fmt"
	"net/http"
	"strings"

	"svc/worker/cache"
	"svc/worker/fleet"
)

// debugCacheBytes cuts the debug listing once this many value bytes are
// in it (truncated: true).
const debugCacheBytes = 4 << 20

// WorkersList is GET /api/v1/fleet/workers.
type WorkersList struct {
	Workers []fleet.Worker `json:"workers"`
}

func (s *UIServer) fleetWorkers(w http.ResponseWriter, r *http.Request) {
	if s.fleet == nil {
		writeError(w, http.StatusNotFound, "not_found", "the worker registry is not running")
		return
	}
	writeJSON(w, http.StatusOK, WorkersList{Workers: s.fleet.Workers()})
}

// CacheListing is GET /api/v1/debug/cache.
type CacheListing struct {
	Persistent bool            `json:"persistent"`
	Rows       int64           `json:"rows_total"`
	Bytes      int64           `json:"bytes_total"`
	MaxRows    int64           `json:"max_rows"`
	MaxBytes   int64           `json:"max_bytes"`
	Truncated  bool            `json:"truncated"`
	Entries    []cache.WireRow `json:"rows"`
}

// debugCache lists cache rows newest first.
func (s *UIServer) debugCache(w http.ResponseWriter, r *http.Request) {
	if s.cache == nil {
		writeError(w, http.StatusNotFound, "not_found", "the handler cache is off (cache.enabled is false)")
		return
	}
	q := r.URL.Query()
	limit, ok := intQuery(w, r, "limit", 200, 1, cache.MaxPageRows)
	if !ok {
		return
	}
	o := cache.ListOptions{Scope: q.Get("scope"), Prefix: q.Get("prefix"), Limit: int(limit)}
	if o.Scope != "" && o.Scope != cache.ScopeLocal && o.Scope != cache.ScopeCluster && o.Scope != cache.ScopeGlobal {
		writeError(w, http.StatusBadRequest, "bad_request", "scope must be local, cluster or global")
		return
	}
	if len(o.Prefix) > cache.MaxKeyBytes {
		writeError(w, http.StatusBadRequest, "bad_request", fmt.Sprintf("prefix over %d bytes", cache.MaxKeyBytes))
		return
	}
	rows, err := s.cache.List(r.Context(), o)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "cache_error", err.Error())
		return
	}
	st := s.cache.Stats()
	out := CacheListing{Persistent: st.Persistent, Rows: st.Rows, Bytes: st.Bytes, MaxRows: st.MaxRows, MaxBytes: st.MaxBytes, Entries: []cache.WireRow{}}
	size := 0
	for i := range rows {
		if size += len(rows[i].Value); size > debugCacheBytes && len(out.Entries) > 0 {
			out.Truncated = true
			break
		}
		out.Entries = append(out.Entries, rows[i].Wire())
	}
	writeJSON(w, http.StatusOK, out)
}

// peerServed says why the peer route answers 404, or "" when it serves.
func (s *UIServer) peerServed() string {
	switch {
	case !s.cfg.Cache.Enabled:
		return "cache.enabled is false"
	case s.cfg.Storage.Dir == "" || s.cache == nil || !s.cache.Persistent():
		return "the cache is memory-only (storage.dir is empty or unusable)"
	case !s.cfg.CacheExchangeOn():
		return "fleet.cache_exchange.enabled is false"
	}
	return ""
}

// peerCacheChanges serves the rows this worker originated to peers
// (public, no token).
func (s *UIServer) peerCacheChanges(w http.ResponseWriter, r *http.Request) {
	if why := s.peerServed(); why != "" {
		writeError(w, http.StatusNotFound, "not_found", "this worker serves no cache rows to peers: "+why)
		return
	}
	limit, ok := intQuery(w, r, "limit", cache.DefaultPageRows, 1, cache.MaxPageRows)
	if !ok {
		return
	}
	q := r.URL.Query()
	scopes := []string{cache.ScopeCluster, cache.ScopeGlobal}
	if v := q.Get("scopes"); v != "" {
		scopes = strings.Split(v, ",")
		if len(scopes) > 2 {
			writeError(w, http.StatusBadRequest, "bad_request", "scopes lists at most cluster and global")
			return
		}
	}
	page, err := s.cache.Changes(r.Context(), scopes, q.Get("since"), int(limit))
	switch {
	case cache.IsBadRequest(err):
		writeError(w, http.StatusBadRequest, "bad_request", err.Error())
		return
	case err != nil:
		writeError(w, http.StatusInternalServerError, "cache_error", err.Error())
		return
	}
	writeJSON(w, http.StatusOK, page.Wire())
}
