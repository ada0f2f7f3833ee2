package recorder

import (
	"cmp"
	"slices"
	"sync"

	"svc/worker/event"
)

// ring keeps the most recent events and task rows in memory-only mode; each
// holds up to size items and overwrites the oldest.
type ring struct {
	mu  sync.Mutex
	evs lastN[event.Event]
	tks lastN[event.TaskRow]
}

// lastN holds the last size items appended; at(i) is the i-th oldest.
type lastN[T any] struct {
	size  int
	items []T
	next  int // where the next item goes once full; also the oldest
}

func (l *lastN[T]) add(v T) {
	if len(l.items) < l.size {
		l.items = append(l.items, v)
		return
	}
	l.items[l.next] = v
	l.next = (l.next + 1) % l.size
}

func (l *lastN[T]) len() int   { return len(l.items) }
func (l *lastN[T]) at(i int) T { return l.items[(l.next+i)%len(l.items)] }

func newRing(size int) *ring {
	return &ring{evs: lastN[event.Event]{size: size}, tks: lastN[event.TaskRow]{size: size}}
}

func (g *ring) addEvent(e event.Event) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.evs.add(e)
}

func (g *ring) addTask(t event.TaskRow) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.tks.add(t)
}

// events returns matching events newest first. Events are appended in ID
// order only approximately (concurrent callers), so the result is sorted.
func (g *ring) events(q EventQuery) []event.Event {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []event.Event
	for i := g.evs.len() - 1; i >= 0; i-- {
		e := g.evs.at(i)
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
	slices.SortStableFunc(out, func(a, b event.Event) int { return cmp.Compare(b.ID, a.ID) })
	if len(out) > q.Limit {
		out = out[:q.Limit]
	}
	return out
}

// tasks returns up to limit task rows newest first.
func (g *ring) tasks(limit int) []event.TaskRow {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]event.TaskRow, 0, min(limit, g.tks.len()))
	for i := g.tks.len() - 1; i >= 0 && len(out) < limit; i-- {
		out = append(out, g.tks.at(i))
	}
	return out
}

// taskEvents returns the events of one task, oldest first.
func (g *ring) taskEvents(taskID string) []event.Event {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []event.Event
	for i := range g.evs.len() {
		if e := g.evs.at(i); e.TaskID == taskID {
			out = append(out, e)
		}
	}
	return out
}

// tasksWhere returns the task rows match accepts, newest first.
func (g *ring) tasksWhere(match func(event.TaskRow) bool, limit int) []event.TaskRow {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []event.TaskRow
	for i := g.tks.len() - 1; i >= 0 && len(out) < limit; i-- {
		if t := g.tks.at(i); match(t) {
			out = append(out, t)
		}
	}
	return out
}
