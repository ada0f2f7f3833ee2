package recorder

import (
	"cmp"
	"math"
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
	out := g.evs.newest(func(e event.Event) bool {
		return (q.BeforeID <= 0 || e.ID < q.BeforeID) && (q.TaskID == "" || e.TaskID == q.TaskID) &&
			(len(q.Types) == 0 || slices.Contains(q.Types, e.Type))
	}, math.MaxInt)
	slices.SortStableFunc(out, func(a, b event.Event) int { return cmp.Compare(b.ID, a.ID) })
	return out[:min(len(out), q.Limit)]
}

// taskEvents returns the events of one task, oldest first.
func (g *ring) taskEvents(taskID string) []event.Event {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := g.evs.newest(func(e event.Event) bool { return e.TaskID == taskID }, math.MaxInt)
	slices.Reverse(out)
	return out
}

// tasksWhere returns up to limit task rows match (nil: all) accepts,
// newest first.
func (g *ring) tasksWhere(match func(event.TaskRow) bool, limit int) []event.TaskRow {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.tks.newest(match, limit)
}

// newest returns up to limit items match (nil: all) accepts, newest first.
func (l *lastN[T]) newest(match func(T) bool, limit int) []T {
	var out []T
	for i := l.len() - 1; i >= 0 && len(out) < limit; i-- {
		if v := l.at(i); match == nil || match(v) {
			out = append(out, v)
		}
	}
	return out
}
