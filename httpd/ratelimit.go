package httpd

import (
	"sync"
	"time"
)

// slidingWindow admits at most limit events in any window-long span: an
// exact sliding log in a ring of the last limit admission times.
type slidingWindow struct {
	mu     sync.Mutex
	window time.Duration
	ring   []int64 // admission times (unix ns); ring[next] is the oldest once full
	next   int
	full   bool
}

func newSlidingWindow(limit int, window time.Duration) *slidingWindow {
	return &slidingWindow{window: window, ring: make([]int64, max(1, limit))}
}

// allow admits an event at now, or refuses it and says how long until the
// oldest admission leaves the window.
func (s *slidingWindow) allow(now time.Time) (bool, time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := now.UnixNano()
	if s.full {
		oldest := s.ring[s.next]
		if wait := oldest + int64(s.window) - t; wait > 0 {
			return false, time.Duration(wait)
		}
	}
	s.ring[s.next] = t
	s.next++
	if s.next == len(s.ring) {
		s.next, s.full = 0, true
	}
	return true, 0
}
