package recorder

import (
	"time"
)

// warnInterval is the least time between two identical repeated warnings
// (same event, same subject), so a condition that persists is reported
// without flooding the log.
const warnInterval = 10 * time.Minute

// warnEvery logs a WARN event msg about subject at most once per
// warnInterval.
func (r *Recorder) warnEvery(msg, subject string, args ...any) {
	now := r.cfg.Now()
	key := msg + "\x00" + subject
	r.warnMu.Lock()
	last, seen := r.warned[key]
	if seen && now.Sub(last) < warnInterval {
		r.warnMu.Unlock()
		return
	}
	if r.warned == nil || len(r.warned) >= 256 {
		r.warned = map[string]time.Time{} // bounded: forget old subjects
	}
	r.warned[key] = now
	r.warnMu.Unlock()
	r.log.Warn(msg, args...)
}
