package executor

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"strings"

	"svc/worker/model"
)

// Limits on fd 3 (docs/executor.md, "fd 3"); lines past them are ignored
// and counted.
const (
	eventLineMax  = 64 << 10 // bytes per line
	eventLinesMax = 1000     // non-empty lines per attempt
	eventBytesMax = 1 << 20  // bytes of accepted lines per attempt
)

// InvalidEventsKind is the annotation kind that reports how many fd 3
// lines an attempt ignored ("svc." kinds are reserved to the worker).
const InvalidEventsKind = "svc.fd3_invalid"

// events collects an attempt's fd 3 NDJSON lines.
type events struct {
	annotations []model.Annotation
	labels      map[string]string
	cache       []model.CacheWrite
	lines       int // non-empty lines seen
	bytes       int // bytes of accepted lines
	malformed   int // not JSON, unknown shape or bad field
	tooLong     int // over eventLineMax
	overLimit   int // past eventLinesMax or eventBytesMax
}

// eventLine is one fd 3 line: at least one member set, each well formed.
type eventLine struct {
	Annotation *model.Annotation `json:"annotation"`
	Labels     map[string]string `json:"labels"`
	Cache      *model.CacheWrite `json:"cache"`
}

// readFrom reads NDJSON lines until EOF or a read error (a deadline).
func (e *events) readFrom(r io.Reader) {
	br := bufio.NewReaderSize(r, 4096)
	var (
		line []byte // the current line's bytes when it spans reads
		long bool   // the current line went over eventLineMax
	)
	for {
		part, err := br.ReadSlice('\n')
		whole := err == nil
		if whole {
			part = part[:len(part)-1]
		}
		switch {
		case long:
		case len(line)+len(part) > eventLineMax:
			long, line = true, line[:0]
		case whole && len(line) == 0:
			e.add(part, false) // in place
			continue
		default:
			line = append(line, part...)
		}
		if whole {
			e.add(line, long)
			line, long = line[:0], false
		} else if err != bufio.ErrBufferFull {
			break
		}
	}
	if len(line) > 0 || long {
		e.add(line, long)
	}
}

// add handles one complete line.
func (e *events) add(b []byte, long bool) {
	b = bytes.TrimSpace(b)
	if len(b) == 0 && !long {
		return
	}
	e.lines++
	switch {
	case e.lines > eventLinesMax:
		e.overLimit++
	case long:
		e.tooLong++
	case e.bytes+len(b) > eventBytesMax:
		e.overLimit++
	case !e.apply(b):
		e.malformed++
	default:
		e.bytes += len(b)
	}
}

// apply decodes and applies a line; false leaves e unchanged.
func (e *events) apply(b []byte) bool {
	var l eventLine
	if json.Unmarshal(b, &l) != nil {
		return false
	}
	return e.applyLine(l)
}

// entry counts one protocol v2 result entry, applied as an fd 3 line.
func (e *events) entry(apply func() bool) {
	e.lines++
	switch {
	case e.lines > eventLinesMax:
		e.overLimit++
	case !apply():
		e.malformed++
	}
}

// applyLine checks and applies a decoded line; false leaves e unchanged.
func (e *events) applyLine(l eventLine) bool {
	if l.Annotation == nil && l.Labels == nil && l.Cache == nil {
		return false
	}
	if a := l.Annotation; a != nil {
		if a.Kind == "" || strings.HasPrefix(a.Kind, "svc.") {
			return false
		}
		switch p := bytes.TrimSpace(a.Payload); {
		case len(p) == 0 || string(p) == "null":
			a.Payload = json.RawMessage("{}")
		case p[0] != '{':
			return false // a payload is a JSON object
		default:
			a.Payload = p
		}
	}
	if c := l.Cache; c != nil {
		if c.Scope == "" {
			c.Scope = "local"
		}
		if c.Key == "" || (c.Scope != "local" && c.Scope != "cluster" && c.Scope != "global") {
			return false
		}
	}
	if _, ok := l.Labels[""]; ok {
		return false
	}
	if a := l.Annotation; a != nil {
		e.annotations = append(e.annotations, *a)
	}
	for k, v := range l.Labels {
		if e.labels == nil {
			e.labels = make(map[string]string, len(l.Labels))
		}
		e.labels[k] = v
	}
	if l.Cache != nil {
		e.cache = append(e.cache, *l.Cache)
	}
	return true
}

// result returns what was collected; ignored lines add one
// InvalidEventsKind annotation.
func (e *events) result() ([]model.Annotation, map[string]string, []model.CacheWrite, int) {
	invalid := e.malformed + e.tooLong + e.overLimit
	if invalid > 0 {
		e.annotations = append(e.annotations, model.Annotation{Kind: InvalidEventsKind, Payload: model.AnnotationPayload(map[string]any{
			"ignored_lines": invalid,
			"malformed":     e.malformed,
			"too_long":      e.tooLong,
			"over_limit":    e.overLimit,
		})})
	}
	return e.annotations, e.labels, e.cache, invalid
}

// tail keeps the last max bytes written to it.
type tail struct {
	max int
	buf []byte
}

// readFrom reads r until EOF or a read error (a deadline).
func (t *tail) readFrom(r io.Reader) {
	chunk := make([]byte, 4096)
	for {
		n, err := r.Read(chunk)
		t.write(chunk[:n])
		if err != nil {
			return
		}
	}
}

// write appends p, compacting once the buffer holds twice max.
func (t *tail) write(p []byte) {
	if len(p) >= t.max {
		t.buf = append(t.buf[:0], p[len(p)-t.max:]...)
		return
	}
	t.buf = append(t.buf, p...)
	if len(t.buf) > 2*t.max {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-t.max:]...)
	}
}

func (t *tail) bytes() []byte {
	if len(t.buf) > t.max {
		return t.buf[len(t.buf)-t.max:]
	}
	return t.buf
}

// readCapped reads r to EOF and returns at most limit bytes; past it,
// onOverflow is called and the rest discarded.
func readCapped(r io.Reader, limit int64, onOverflow func()) ([]byte, bool) {
	out, _ := io.ReadAll(io.LimitReader(r, limit+1))
	if int64(len(out)) <= limit {
		return out, false
	}
	onOverflow()
	_, _ = io.Copy(io.Discard, r)
	return out[:limit], true
}
