package runtimehealth

import (
	"bytes"
	"cmp"
	"runtime"
	"slices"
	"strings"
	"time"
)

const (
	maxTopFrames   = 10
	maxCaptureSize = 4 << 20
)

// episode is the stall in progress; owned by the goroutine in Run.
type episode struct {
	active    bool
	started   time.Time // when the first late beat was due
	lastLate  time.Time
	maxLag    time.Duration
	lateBeats int
}

// lateBeat handles a beat at or over the threshold: the first one of an
// episode samples the stacks, logs and emits; later ones only count.
func (m *Monitor) lateBeat(now time.Time, lag time.Duration) {
	ep := &m.episode
	ep.lastLate = now
	if ep.active {
		ep.lateBeats++
		ep.maxLag = max(ep.maxLag, lag)
		return
	}
	*ep = episode{active: true, started: now.Add(-lag), lastLate: now, maxLag: lag, lateBeats: 1}
	st := Stall{
		TSMS:        now.UnixMilli(),
		LagMS:       ms(lag),
		ThresholdMS: ms(m.o.StallThreshold),
		Goroutines:  runtime.NumGoroutine(),
		TopFrames:   []Frame{},
	}
	if m.lastDump.IsZero() || now.Sub(m.lastDump) >= m.o.StallSampleEvery {
		m.lastDump = now
		st.Sampled = true
		st.TopFrames, st.Dump, st.DumpTruncated = captureStacks(m.o.DumpBytes)
	}
	m.mu.Lock()
	m.stallsTotal++
	m.stalls = append(m.stalls, st)
	if len(m.stalls) > keptStalls {
		m.stalls = slices.Delete(m.stalls, 0, len(m.stalls)-keptStalls)
	}
	m.mu.Unlock()
	m.o.Logger.Warn("runtime_stall_detected", "lag_ms", st.LagMS, "threshold_ms", st.ThresholdMS,
		"goroutines", st.Goroutines, "stack_sampled", st.Sampled)
	m.o.Emit("stall", st)
}

// endEpisode closes the episode once lag stayed low for StallQuiet.
func (m *Monitor) endEpisode(now time.Time) {
	ep := m.episode
	m.episode = episode{}
	end := StallEnd{
		TSMS:       now.UnixMilli(),
		StartedMS:  ep.started.UnixMilli(),
		DurationMS: ms(ep.lastLate.Sub(ep.started)),
		MaxLagMS:   ms(ep.maxLag),
		LateBeats:  ep.lateBeats,
	}
	m.o.Logger.Info("runtime_stall_ended", "duration_ms", end.DurationMS, "max_lag_ms", end.MaxLagMS,
		"late_beats", end.LateBeats)
	m.o.Emit("stall_ended", end)
}

// captureStacks dumps every goroutine but the caller's and returns the top
// frames (of a capture larger than limit), the dump cut to limit bytes at a
// line end, and whether anything was cut.
func captureStacks(limit int) ([]Frame, string, bool) {
	buf := make([]byte, min(4*limit, maxCaptureSize))
	n := runtime.Stack(buf, true)
	dump := buf[:n]
	cut := n == len(buf)
	// The caller's own goroutine comes first; it is this monitor.
	if i := bytes.Index(dump, []byte("\n\n")); i >= 0 {
		dump = dump[i+2:]
	} else {
		dump = nil
	}
	frames := topFrames(dump)
	if len(dump) > limit {
		keep := dump[:limit]
		if i := bytes.LastIndexByte(keep, '\n'); i > 0 {
			keep = keep[:i+1]
		}
		dump, cut = keep, true
	}
	return frames, string(dump), cut
}

// topFrames groups the goroutines of a runtime.Stack dump by state and
// innermost frame outside package runtime; running and runnable ones (what
// kept the heartbeat waiting) sort first, then larger groups.
func topFrames(dump []byte) []Frame {
	type key struct{ state, fn, loc string }
	counts := map[key]int{}
	for block := range strings.SplitSeq(string(dump), "\n\n") {
		lines := strings.Split(block, "\n")
		if len(lines) < 3 || !strings.HasPrefix(lines[0], "goroutine ") || strings.HasPrefix(lines[1], "\t") {
			continue
		}
		fn, loc := lines[1], lines[2]
		for i := 1; i+1 < len(lines) && strings.HasPrefix(fn, "runtime."); i += 2 {
			if next := lines[i+2:]; len(next) >= 2 && !strings.HasPrefix(next[0], "\t") &&
				!strings.HasPrefix(next[0], "created by ") && strings.HasPrefix(next[1], "\t") {
				fn, loc = next[0], next[1]
			} else {
				break
			}
		}
		counts[key{goroutineState(lines[0]), funcName(fn), location(loc)}]++
	}
	frames := make([]Frame, 0, len(counts))
	for k, n := range counts {
		frames = append(frames, Frame{State: k.state, Function: k.fn, Location: k.loc, Goroutines: n})
	}
	slices.SortFunc(frames, func(a, b Frame) int {
		return cmp.Or(
			cmp.Compare(stateRank(a.State), stateRank(b.State)),
			cmp.Compare(b.Goroutines, a.Goroutines),
			strings.Compare(a.Function, b.Function),
			strings.Compare(a.Location, b.Location),
		)
	})
	return frames[:min(len(frames), maxTopFrames)]
}

// goroutineState returns "chan receive" from "goroutine 7 [chan receive, 2 minutes]:".
func goroutineState(header string) string {
	_, rest, _ := strings.Cut(header, "[")
	state, _, _ := strings.Cut(rest, "]")
	state, _, _ = strings.Cut(state, ",")
	return state
}

// funcName strips the argument list: "pkg.(*T).m(0x1, 0x2)" → "pkg.(*T).m".
func funcName(line string) string {
	if strings.HasSuffix(line, ")") {
		if i := strings.LastIndexByte(line, '('); i > 0 {
			return line[:i]
		}
	}
	return line
}

// location strips the tab and pc offset: "\t/a/b.go:12 +0x1d" → "/a/b.go:12".
func location(line string) string {
	if !strings.HasPrefix(line, "\t") {
		return ""
	}
	loc, _, _ := strings.Cut(line[1:], " +0x")
	return loc
}

func stateRank(state string) int {
	switch state {
	case "running":
		return 0
	case "runnable":
		return 1
	}
	return 2
}
