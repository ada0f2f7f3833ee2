package httpd

import (
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"time"

	"svc/worker"
	"svc/worker/config"
	"svc/worker/fleet"
	"svc/worker/payload"
)

// RunningTask is one task of GET /api/v1/running (fields: docs/api.md).
type RunningTask struct {
	TaskID       string `json:"task_id"`
	Source       string `json:"source"`
	Alias        string `json:"alias,omitempty"`
	Partition    *int32 `json:"partition,omitempty"`
	Offset       *int64 `json:"offset,omitempty"`
	RequestID    string `json:"request_id,omitempty"`
	Key          string `json:"key"`
	KeyEncoding  string `json:"key_encoding"`
	KeyTruncated bool   `json:"key_truncated,omitempty"`
	Attempt      int    `json:"attempt"`
	AttemptEnded bool   `json:"attempt_ended"`
	StartedAtMS  int64  `json:"started_at_ms"`
	ElapsedMS    int64  `json:"elapsed_ms"`
}

// RunningPeer is another worker's list in a fleet answer.
type RunningPeer struct {
	Worker string        `json:"worker"`
	URL    string        `json:"url"`
	Tasks  []RunningTask `json:"tasks"`
	Total  int           `json:"total"`
}

// Running is GET /api/v1/running: this worker's running tasks, longest
// running first, at most limit (Total counts all); with scope fleet, the
// other workers' lists and the workers missing from the answer.
type Running struct {
	Worker  string         `json:"worker"`
	Scope   string         `json:"scope"`
	Tasks   []RunningTask  `json:"tasks"`
	Total   int            `json:"total"`
	Peers   []RunningPeer  `json:"peers"`
	Missing []TraceMissing `json:"missing"`
}

// running serves GET /api/v1/running. Scope fleet asks the other live,
// trusted workers for their own lists (askPeers), so the browser asks this
// worker only (the route sends no CORS header).
func (s *UIServer) running(w http.ResponseWriter, r *http.Request) {
	limit, ok := intQuery(w, r, "limit", 100, 1, 1000)
	if !ok {
		return
	}
	q := r.URL.Query()
	scope, ok := oneOf(w, r, "scope",
		"scope must be local (this worker's tasks) or fleet (every live, trusted worker's)", scopeLocal, "fleet")
	if !ok {
		return
	}
	out := Running{Worker: s.cfg.Worker.Name, Scope: scope, Tasks: []RunningTask{}, Peers: []RunningPeer{}, Missing: []TraceMissing{}}
	if s.app != nil {
		out.Tasks, out.Total = s.runningTasks(int(limit), q.Get("task_id"))
	}
	if scope == "fleet" && s.fleet != nil {
		asked, skipped := s.livePeers(func(fleet.Worker) bool { return true }, unreachable)
		pq := url.Values{"limit": {fmt.Sprint(limit)}}
		if id := q.Get("task_id"); id != "" {
			pq.Set("task_id", id)
		}
		got, failed := askPeers[Running](r.Context(), s, asked, "/api/v1/running", pq)
		out.Missing = append(append(out.Missing, skipped...), failed...)
		for _, wk := range asked {
			p, ok := got[wk.Name]
			switch {
			case !ok:
			case p.Tasks == nil || len(p.Tasks) > int(limit) || p.Total < len(p.Tasks):
				out.Missing = append(out.Missing, TraceMissing{wk.Name, wk.URL, "implausible answer"})
			default:
				out.Peers = append(out.Peers, RunningPeer{Worker: wk.Name, URL: wk.URL, Tasks: p.Tasks, Total: p.Total})
			}
		}
		sort.Slice(out.Peers, func(i, j int) bool { return out.Peers[i].Worker < out.Peers[j].Worker })
		sort.Slice(out.Missing, func(i, j int) bool { return out.Missing[i].Worker < out.Missing[j].Worker })
	}
	writeJSON(w, http.StatusOK, out)
}

// runningTasks is the limit longest-running tasks, or the task id alone.
func (s *UIServer) runningTasks(limit int, id string) ([]RunningTask, int) {
	var list []worker.RunningTask
	var total int
	if id == "" {
		list, total = s.app.Running().Snapshot(limit)
	} else if t, ok := s.app.Running().Find(id); ok {
		list, total = append(list, t), 1
	}
	now := time.Now()
	out := make([]RunningTask, 0, len(list))
	for _, t := range list {
		rt := RunningTask{TaskID: t.TaskID, Source: t.Source, RequestID: t.RequestID, KeyTruncated: t.KeyTruncated,
			Attempt: t.Attempt, AttemptEnded: t.AttemptEnded, StartedAtMS: t.Started.UnixMilli(), ElapsedMS: now.Sub(t.Started).Milliseconds()}
		if t.Alias != "" {
			rt.Alias, rt.Partition, rt.Offset = t.Alias, new(t.Partition), new(t.Offset)
		}
		rt.Key, rt.KeyEncoding = payload.Encode(t.Key)
		out = append(out, rt)
	}
	return out, total
}

const unreachable = "unreachable: its card has no recent heartbeat"

// livePeers splits the other workers that want keeps into those to ask
// (live or a static peer; trusted, since the request carries the UI token;
// one per origin, never this worker's) and the others, with the reason.
func (s *UIServer) livePeers(want func(fleet.Worker) bool, unreachableWhy string) (ask []fleet.Worker, missing []TraceMissing) {
	list := s.fleet.Workers()
	asked := map[string]bool{}
	for _, w := range list {
		if w.Self {
			asked[config.Origin(w.URL)] = true
		}
	}
	for _, w := range list {
		if w.Self || !want(w) {
			continue
		}
		origin := config.Origin(w.URL)
		switch {
		case w.State == fleet.StateStopped:
			missing = append(missing, TraceMissing{w.Name, w.URL, "stopped: it runs nothing"})
		case w.State == fleet.StateUnreachable && w.Provider != fleet.ProviderStatic:
			missing = append(missing, TraceMissing{w.Name, w.URL, unreachableWhy})
		case origin == "":
			missing = append(missing, TraceMissing{w.Name, w.URL, "its card names no usable http(s) URL"})
		case !w.Trusted:
			missing = append(missing, TraceMissing{w.Name, w.URL, "not trusted: its origin is not in fleet.trusted_urls, so it is not sent the UI token nor asked"})
		case asked[origin]:
		default:
			asked[origin] = true
			ask = append(ask, w)
		}
	}
	return ask, missing
}
