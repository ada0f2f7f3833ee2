package recorder

import (
	"cmp"
	"slices"
	"sync"
)

// ring keeps the most recent events and task rows in memory-only mode; each
// holds up to size items and overwrites the oldest.
type ring struct {
	mu     sync.Mutex
	size   int
	evs    []Event
	evNext int
	tks    []TaskRow
	tkNext int
}

func newRing(size int) *ring {
	return &ring{size: size}
}

func (g *ring) addEvent(e Event) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.evs) < g.size {
		g.evs = append(g.evs, e)
		return
	}
	g.evs[g.evNext] = e
	g.evNext = (g.evNext + 1) % g.size
}

func (g *ring) addTask(t TaskRow) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.tks) < g.size {
		g.tks = append(g.tks, t)
		return
	}
	g.tks[g.tkNext] = t
	g.tkNext = (g.tkNext + 1) % g.size
}

// events returns matching events newest first. Events are appended in ID
// order only approximately (concurrent callers), so the result is sorted.
func (g *ring) events(q EventQuery) []Event {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []Event
	for i := len(g.evs) - 1; i >= 0; i-- {
		e := g.evs[(g.evNext+i)%len(g.evs)]
		if q.BeforeID > 0 && e.ID >= q.BeforeID {
			continue
		}
		if q.TaskID != "" && e.TaskID != q.TaskID {
			continue
		}
		if len(q.Types) > 0 && !slices.Contains(q.Types, e.Type) {
			continue
		}
		out = append(out, e)
	}
	slices.SortStableFunc(out, func(a, b Event) int { return cmp.Compare(b.ID, a.ID) })
	if len(out) > q.Limit {
		out = out[:q.Limit]
	}
	return out
}

// tasks returns up to limit task rows newest first.
func (g *ring) tasks(limit int) []TaskRow {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]TaskRow, 0, min(limit, len(g.tks)))
	for i := len(g.tks) - 1; i >= 0 && len(out) < limit; i-- {
		out = append(out, g.tks[(g.tkNext+i)%len(g.tks)])
	}
	return out
}

// taskEvents returns the events of one task, oldest first.
func (g *ring) taskEvents(taskID string) []Event {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []Event
	for i := range g.evs {
		if e := g.evs[(g.evNext+i)%len(g.evs)]; e.TaskID == taskID {
			out = append(out, e)
		}
	}
	return out
}

// tasksByLabel returns task rows carrying label name=value, newest first.
func (g *ring) tasksByLabel(name, value string, limit int) []TaskRow {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []TaskRow
	for i := len(g.tks) - 1; i >= 0 && len(out) < limit; i-- {
		t := g.tks[(g.tkNext+i)%len(g.tks)]
		if v, ok := t.Labels[name]; ok && v == value {
			out = append(out, t)
		}
	}
	return out
}
