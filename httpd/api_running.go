package httpd

import (
	"net/http"
	"time"

	"svc/worker/payload"
)

// RunningTask is one task of GET /api/v1/running. Alias, partition and
// offset are set for a Kafka task, request_id for an HTTP one. Key follows
// the UTF-8-or-base64 rule (key_encoding), at most 1 KiB of it
// (key_truncated). Attempt 0 means the task waits for an executor slot.
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
	StartedAtMS  int64  `json:"started_at_ms"`
	ElapsedMS    int64  `json:"elapsed_ms"`
}

// Running is GET /api/v1/running: this worker's running tasks, longest
// running first, at most limit of them; Total counts them all.
type Running struct {
	Worker string        `json:"worker"`
	Tasks  []RunningTask `json:"tasks"`
	Total  int           `json:"total"`
}

// running serves GET /api/v1/running?limit=N (1-1000, default 100).
func (s *UIServer) running(w http.ResponseWriter, r *http.Request) {
	limit, err := intQuery(r, "limit", 100, 1, 1000)
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	out := Running{Worker: s.cfg.Worker.Name, Tasks: []RunningTask{}}
	if s.app == nil {
		writeJSON(w, http.StatusOK, out)
		return
	}
	list, total := s.app.Running().Snapshot(int(limit))
	now := time.Now()
	out.Total = total
	for _, t := range list {
		rt := RunningTask{TaskID: t.TaskID, Source: t.Source, RequestID: t.RequestID, KeyTruncated: t.KeyTruncated,
			Attempt: t.Attempt, StartedAtMS: t.Started.UnixMilli(), ElapsedMS: now.Sub(t.Started).Milliseconds()}
		if t.Alias != "" {
			p, o := t.Partition, t.Offset
			rt.Alias, rt.Partition, rt.Offset = t.Alias, &p, &o
		}
		rt.Key, rt.KeyEncoding = payload.Encode(t.Key)
		out.Tasks = append(out.Tasks, rt)
	}
	writeJSON(w, http.StatusOK, out)
}
