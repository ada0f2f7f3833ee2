package worker

import (
	"cmp"
	"slices"
	"svc/worker/model"
	"sync"
	"time"
)

// RunningTasks is the registry of the tasks in the executor pool now, for
// every source; the attempt number is stored on the task (Events.Attempt).
type RunningTasks struct {
	mu    sync.Mutex
	tasks map[*model.Task]runningEntry
}

type runningEntry struct {
	source  string
	started time.Time
}

// RunningTask is one running task as the API reports it. Key is a copy of
// at most MaxRunningKey bytes of the message key. Attempt is the executor
// attempt now (0 while waiting for a slot); AttemptEnded says it ended and
// the next has not started.
type RunningTask struct {
	TaskID       string
	Source       string
	Alias        string
	Partition    int32
	Offset       int64
	RequestID    string
	Key          []byte
	KeyTruncated bool
	Attempt      int
	AttemptEnded bool
	Started      time.Time
}

// AttemptNow is a running task's executor attempt (as in RunningTask).
type AttemptNow struct {
	N     int
	Ended bool
}

func attemptOf(t *model.Task) AttemptNow {
	n, ended := t.RunningAttempt()
	return AttemptNow{N: n, Ended: ended}
}

// MaxRunningKey bounds the key bytes a running-task snapshot copies.
const MaxRunningKey = 1024

func newRunningTasks() *RunningTasks {
	return &RunningTasks{tasks: make(map[*model.Task]runningEntry, 64)}
}

func (r *RunningTasks) add(t *model.Task, source string, now time.Time) {
	r.mu.Lock()
	r.tasks[t] = runningEntry{source: source, started: now}
	r.mu.Unlock()
}

func (r *RunningTasks) remove(t *model.Task) {
	r.mu.Lock()
	delete(r.tasks, t)
	r.mu.Unlock()
}

// Len is the number of tasks running now.
func (r *RunningTasks) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.tasks)
}

// Find returns the task of that id if it runs now (a scan, for the API).
func (r *RunningTasks) Find(id string) (RunningTask, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for t, e := range r.tasks {
		if t.ID == id {
			return r.show(t, e), true
		}
	}
	return RunningTask{}, false
}

// Attempts returns the executor attempt of each running task by id.
func (r *RunningTasks) Attempts() map[string]AttemptNow {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]AttemptNow, len(r.tasks))
	for t := range r.tasks {
		out[t.ID] = attemptOf(t)
	}
	return out
}

// Snapshot returns the limit longest-running tasks, longest first (ties by
// task id), and how many run in all. limit <= 0 returns none.
func (r *RunningTasks) Snapshot(limit int) ([]RunningTask, int) {
	type ent struct {
		t *model.Task
		e runningEntry
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	total := len(r.tasks)
	all := make([]ent, 0, total)
	for t, e := range r.tasks {
		all = append(all, ent{t, e})
	}
	slices.SortFunc(all, func(a, b ent) int {
		return cmp.Or(a.e.started.Compare(b.e.started), cmp.Compare(a.t.ID, b.t.ID))
	})
	all = all[:min(len(all), max(limit, 0))]
	out := make([]RunningTask, len(all))
	for i, x := range all {
		out[i] = r.show(x.t, x.e)
	}
	return out, total
}

// show copies what the API shows of a running task.
func (r *RunningTasks) show(t *model.Task, e runningEntry) RunningTask {
	a := attemptOf(t)
	rt := RunningTask{TaskID: t.ID, Source: e.source, RequestID: t.RequestID, Attempt: a.N, AttemptEnded: a.Ended, Started: e.started}
	if m := t.Msg; m != nil {
		if e.source == model.SourceKafka {
			rt.Alias, rt.Partition, rt.Offset = m.Alias, m.Partition, m.Offset
		}
		key := m.Key
		if len(key) > MaxRunningKey {
			key, rt.KeyTruncated = key[:MaxRunningKey], true
		}
		if key != nil {
			rt.Key = append([]byte{}, key...)
		}
	}
	return rt
}
