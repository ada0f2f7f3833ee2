package runtimehealth

import (
	"math"
	"slices"
	"time"
)

// beat is one heartbeat: when it woke and how late.
type beat struct {
	at  time.Time
	lag time.Duration
}

// lagRing keeps the beats of the last window in a fixed ring (slots not
// yet written hold the zero time, before any window). Owned by the monitor
// goroutine.
type lagRing struct {
	beats  []beat
	next   int
	sorted []time.Duration // scratch for quantiles
}

func newLagRing(size int) *lagRing {
	return &lagRing{beats: make([]beat, size)}
}

func (r *lagRing) add(at time.Time, lag time.Duration) {
	r.beats[r.next] = beat{at, lag}
	r.next = (r.next + 1) % len(r.beats)
}

// lagStats are heartbeat lag percentiles over a window.
type lagStats struct {
	beats         int
	p50, p99, max time.Duration
}

// stats returns the percentiles (nearest rank) of the beats at or after since.
func (r *lagRing) stats(since time.Time) lagStats {
	r.sorted = r.sorted[:0]
	for _, b := range r.beats {
		if !b.at.Before(since) {
			r.sorted = append(r.sorted, b.lag)
		}
	}
	if len(r.sorted) == 0 {
		return lagStats{}
	}
	slices.Sort(r.sorted)
	return lagStats{
		beats: len(r.sorted),
		p50:   nearestRank(r.sorted, 0.50),
		p99:   nearestRank(r.sorted, 0.99),
		max:   r.sorted[len(r.sorted)-1],
	}
}

// nearestRank returns the q-quantile of sorted, which is not empty.
func nearestRank(sorted []time.Duration, q float64) time.Duration {
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}
