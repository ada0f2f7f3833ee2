package throughput

import (
	"maps"
	"slices"
)

// disabledReason is what Snapshot says without a cost label.
const disabledReason = "throughput.cost_label is not set"

// Snapshot is the body of GET /api/v1/debug/throughput. Disabled, it is
// exactly {"enabled":false,"reason":"throughput.cost_label is not set"}.
type Snapshot struct {
	Enabled       bool    `json:"enabled"`
	Reason        string  `json:"reason,omitzero"`
	CostLabel     string  `json:"cost_label,omitzero"`
	WindowSeconds float64 `json:"window_seconds,omitzero"`
	History       int     `json:"history,omitzero"` // closed windows kept
	// Current is the open window, its rate over the time elapsed in it.
	Current *Window `json:"current,omitzero"`
	// Windows are the closed windows, newest first (empty ones included).
	Windows []Window `json:"windows,omitzero"`
	// Totals covers everything since the tracker was made.
	Totals *Window `json:"totals,omitzero"`
	// Skipped counts skipped tasks since start, by reason (all listed).
	Skipped map[string]int64 `json:"skipped,omitzero"`
}

// Snapshot returns the windows as of now (the disabled form for a nil or
// disabled tracker).
func (t *Tracker) Snapshot() Snapshot {
	if t == nil || !t.enabled {
		return Snapshot{Reason: disabledReason}
	}
	now := t.o.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.roll(now)
	cur := t.cur.view(t.cur.end, max(now.Sub(t.cur.start), 0))
	totals := t.totals.view(now, max(now.Sub(t.totals.start), 0))
	s := Snapshot{
		Enabled:       true,
		CostLabel:     t.o.CostLabel,
		WindowSeconds: t.o.Window.Seconds(),
		History:       t.o.History,
		Current:       &cur,
		Windows:       make([]Window, 0, len(t.closed)),
		Totals:        &totals,
		Skipped:       maps.Clone(t.skipped),
	}
	for _, w := range slices.Backward(t.closed) {
		s.Windows = append(s.Windows, w.view(w.end, w.end.Sub(w.start)))
	}
	return s
}
