package httpd

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"svc/recorder"
	"svc/worker/event"
)

// intQuery reads an optional integer query parameter within [lo, hi]; one
// out of range answers 400 (ok false).
func intQuery(w http.ResponseWriter, r *http.Request, name string, def, lo, hi int64) (n int64, ok bool) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, true
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < lo || n > hi {
		detail := fmt.Sprintf("%s must be an integer from %d to %d, got %q", name, lo, hi, v)
		writeError(w, http.StatusBadRequest, "bad_request", detail)
		return 0, false
	}
	return n, true
}

// oneOf reads query parameter name: one of allowed, the first when absent
// or empty; anything else answers 400 with detail (ok false).
func oneOf(w http.ResponseWriter, r *http.Request, name, detail string, allowed ...string) (v string, ok bool) {
	v = r.URL.Query().Get(name)
	switch {
	case v == "":
		return allowed[0], true
	case slices.Contains(allowed, v):
		return v, true
	}
	writeError(w, http.StatusBadRequest, "bad_request", detail)
	return "", false
}

// events serves GET /api/v1/events, newest first.
func (s *UIServer) events(w http.ResponseWriter, r *http.Request) {
	limit, ok := intQuery(w, r, "limit", 200, 1, 1000)
	if !ok {
		return
	}
	before, ok := intQuery(w, r, "before_id", 0, 0, 1<<62)
	if !ok {
		return
	}
	q := recorder.EventQuery{Limit: int(limit), TaskID: r.URL.Query().Get("task_id"), BeforeID: before}
	known := event.Types()
	for _, t := range strings.Split(r.URL.Query().Get("types"), ",") {
		if t = strings.TrimSpace(t); t == "" {
			continue
		}
		if !slices.Contains(known, t) {
			writeError(w, http.StatusBadRequest, "bad_request", fmt.Sprintf("types: %q is not an event type; known types: %s", t, strings.Join(known, ", ")))
			return
		}
		q.Types = append(q.Types, t)
	}
	evs, err := s.rec.Events(r.Context(), q)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "recorder_error", err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"events": nonNil(evs)})
}

// taskResults serves GET /api/v1/live/task-results, newest first.
func (s *UIServer) taskResults(w http.ResponseWriter, r *http.Request) {
	limit, ok := intQuery(w, r, "limit", 200, 1, 1000)
	if !ok {
		return
	}
	rows, err := s.rec.TaskResults(r.Context(), int(limit))
	if err != nil {
		writeError(w, http.StatusInternalServerError, "recorder_error", err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"results": nonNil(rows)})
}

// counts serves the dashboard's task counts and the history's reach and
// size; a memory-only recorder's counts are zeroed, flagged memory_only.
func (s *UIServer) counts(w http.ResponseWriter, r *http.Request) {
	c, err := s.rec.Counts(r.Context())
	if err != nil {
		writeError(w, http.StatusInternalServerError, "recorder_error", err.Error())
		return
	}
	memory := s.rec.MemoryOnly()
	if memory {
		c.Total, c.BySource = 0, map[string]map[string]int64{}
	}
	writeJSON(w, http.StatusOK, struct {
		recorder.Counts
		MemoryOnly bool                  `json:"memory_only"`
		History    recorder.HistoryUsage `json:"history"`
	}{c, memory, s.rec.History()})
}

// databases lists the recorder files of the shared folder.
func (s *UIServer) databases(w http.ResponseWriter, r *http.Request) {
	dbs, err := s.rec.Databases(r.Context())
	if err != nil {
		writeError(w, http.StatusInternalServerError, "recorder_error", err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"databases": nonNil(dbs), "history": s.rec.History()})
}

// trace serves every event of one task (scope: traceScope).
func (s *UIServer) trace(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("task_id")
	if id == "" {
		writeError(w, http.StatusBadRequest, "bad_request", "task_id is required")
		return
	}
	scope, scopeName, err := traceScope(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	out := TraceAnswer{TaskID: id, Scope: scopeName, Sources: []string{s.cfg.Worker.Name}, Missing: []TraceMissing{}}
	collect := askPeersMeanwhile[TraceAnswer](r, s, scope, "/api/v1/debug/trace", url.Values{"task_id": {id}})
	evs, err := s.rec.TraceIn(r.Context(), id, scope)
	peers, missing := collect()
	out.Missing = append(out.Missing, missing...)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "recorder_error", err.Error())
		return
	}
	lists := [][]event.Event{evs}
	for _, name := range sortedKeys(peers) {
		out.Sources = append(out.Sources, name)
		lists = append(lists, slices.DeleteFunc(peers[name].Events, func(e event.Event) bool { return e.TaskID != id }))
	}
	out.Events = nonNil(recorder.MergeEvents(lists...))
	sortMissing(out.Missing)
	writeJSON(w, http.StatusOK, out)
}

// traceByLabel finds task rows by one label, across the files trace reads.
func (s *UIServer) traceByLabel(w http.ResponseWriter, r *http.Request) {
	name := r.URL.Query().Get("name")
	values, hasValue := r.URL.Query()["value"]
	if name == "" {
		writeError(w, http.StatusBadRequest, "bad_request", "name is required: the label to look for (value is optional; without it any value matches)")
		return
	}
	limit, ok := intQuery(w, r, "limit", 100, 1, 1000)
	if !ok {
		return
	}
	scope, scopeName, err := traceScope(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	var value *string
	q := url.Values{"name": {name}, "limit": {strconv.FormatInt(limit, 10)}}
	if hasValue {
		value = &values[0]
		q.Set("value", values[0])
	}
	out := LabelAnswer{Scope: scopeName, Sources: []string{s.cfg.Worker.Name}, Missing: []TraceMissing{}}
	collect := askPeersMeanwhile[LabelAnswer](r, s, scope, "/api/v1/debug/trace-by-label", q)
	rows, err := s.rec.TraceByLabelIn(r.Context(), name, value, int(limit), scope)
	peers, missing := collect()
	out.Missing = append(out.Missing, missing...)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "recorder_error", err.Error())
		return
	}
	lists := [][]event.TaskRow{rows}
	for _, peer := range sortedKeys(peers) {
		out.Sources = append(out.Sources, peer)
		lists = append(lists, peers[peer].Tasks)
	}
	out.Tasks = nonNil(recorder.MergeTaskRows(name, value, int(limit), lists...))
	sortMissing(out.Missing)
	writeJSON(w, http.StatusOK, out)
}

// nonNil is s, or an empty slice for nil: a JSON list, never null.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func sortedKeys[T any](m map[string]T) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func sortMissing(m []TraceMissing) {
	slices.SortFunc(m, func(a, b TraceMissing) int { return strings.Compare(a.Worker, b.Worker) })
}

// download serves a database of the shared folder by relative path; any
// other shape, a symlink or a file outside shared.dir is 404.
func (s *UIServer) download(w http.ResponseWriter, r *http.Request) {
	rel := r.URL.Query().Get("path")
	if rel == "" {
		writeError(w, http.StatusBadRequest, "bad_request", "path is required: a database path as GET /api/v1/debug/databases lists it, e.g. history/<cluster>/<name>.db")
		return
	}
	var (
		f   io.ReadSeekCloser
		mod time.Time
		err error
	)
	if ioErr := s.app.IO().Do(r.Context(), func() {
		file, info, oerr := s.rec.OpenDownload(rel)
		if oerr != nil {
			err = oerr
			return
		}
		f, mod = file, info.ModTime()
	}); ioErr != nil {
		return
	}
	if err != nil {
		if errors.Is(err, recorder.ErrNotFound) {
			writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("no downloadable database at %q (allowed shapes: history/<cluster>/<name>.db, history/<cluster>/<archive>.db.gz, merged/<name>.db; no links)", cut(rel, 200)))
			return
		}
		writeError(w, http.StatusInternalServerError, "recorder_error", "cannot open the database")
		return
	}
	defer f.Close()
	_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
	attachment(w, path.Base(rel))
	http.ServeContent(w, r, path.Base(rel), mod, f)
}

// downloadLive streams a consistent snapshot of this worker's live file.
func (s *UIServer) downloadLive(w http.ResponseWriter, r *http.Request) {
	_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
	name := fmt.Sprintf("%s-live-%d.db", s.cfg.Worker.Name, time.Now().UnixMilli())
	pw := &lazyHeaderWriter{w: w, start: func() { attachment(w, name) }}
	err := s.rec.SnapshotLive(r.Context(), pw)
	switch {
	case err == nil:
	case pw.started:
		panic(http.ErrAbortHandler) // mid-body: cut the connection so the client sees a broken download
	case errors.Is(err, recorder.ErrNoLiveFile):
		writeError(w, http.StatusNotFound, "no_live_file", "storage.dir is empty: the recorder is memory-only and has no live file")
	default:
		writeError(w, http.StatusInternalServerError, "recorder_error", "cannot snapshot the live file")
	}
}

// attachment sets the headers of a database download.
func attachment(w http.ResponseWriter, name string) {
	w.Header().Set("Content-Disposition", `attachment; filename="`+name+`"`)
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("X-Content-Type-Options", "nosniff")
}

// lazyHeaderWriter sets the download headers at the first byte, so an
// error before it can still be a JSON error.
type lazyHeaderWriter struct {
	w       http.ResponseWriter
	start   func()
	started bool
}

func (l *lazyHeaderWriter) Write(p []byte) (int, error) {
	if !l.started {
		l.started = true
		l.start()
	}
	return l.w.Write(p)
}

// merge folds sealed or merged databases into a new merged/ file.
func (s *UIServer) merge(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Paths []string `json:"paths"`
	}
	if err := decodeJSON(r, &req); err != nil {
		bodyError(w, err)
		return
	}
	res, err := s.rec.Merge(r.Context(), req.Paths)
	switch {
	case err == nil:
		writeJSON(w, http.StatusOK, res)
	case errors.Is(err, recorder.ErrBadShape):
		writeError(w, http.StatusBadRequest, "bad_path", "merge takes a non-empty list of paths shaped history/<cluster>/<name>.db or merged/<name>.db")
	case errors.Is(err, recorder.ErrNotFound):
		writeError(w, http.StatusNotFound, "not_found", "a path does not name a database of the shared folder: "+err.Error())
	case errors.Is(err, recorder.ErrNoSharedDir):
		writeError(w, http.StatusConflict, "no_shared_dir", "neither shared.dir nor storage.dir is set: there is nowhere to write a merge result")
	case errors.Is(err, recorder.ErrUnsafePath):
		writeError(w, http.StatusNotFound, "not_found", err.Error())
	default:
		writeError(w, http.StatusInternalServerError, "merge_failed", err.Error())
	}
}
