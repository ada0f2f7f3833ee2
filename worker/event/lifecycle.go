package event

import (
	"bytes"
	"maps"
	"strconv"
)

// Lifecycle is what a successful first attempt's three lifecycle events
// (task_received, executor_started, executor_finished) say beyond their
// task row: the recorder stores it with the row and Expand rebuilds the
// events byte for byte, stdout tail aside. Fold refuses anything it could
// not rebuild exactly, so a Lifecycle never misstates what happened.
type Lifecycle struct {
	ReceivedID      int64 // event ID of task_received
	StartedDID      int64 // executor_started ID − ReceivedID
	FinishedDID     int64 // executor_finished ID − ReceivedID
	ReceivedMs      int64 // ts_ms of task_received
	StartedDMs      int64 // executor_started ts_ms − ReceivedMs
	FinishedDMs     int64 // executor_finished ts_ms − ReceivedMs
	InputSizeBytes  int64 // task_received's input_size_bytes
	AttemptDuration int64 // executor_finished's duration_ms
}

// IsLifecycle reports whether e is one of the events a Lifecycle stands for.
func IsLifecycle(e *Event) bool {
	if e.TaskID == "" || e.Kind != "" {
		return false
	}
	switch e.Type {
	case TypeTaskReceived, TypeExecutorStarted, TypeExecutorFinished:
		return true
	}
	return false
}

// startedFirst is executor_started's payload for a first attempt.
const startedFirst = `{"attempt":1}`

// Expand rebuilds the three lifecycle events of row (labels never nil).
func (l Lifecycle) Expand(row *TaskRow) []Event {
	ev := func(id, ts int64, typ string, p []byte) Event {
		labels := maps.Clone(row.Labels)
		if labels == nil {
			labels = map[string]string{}
		}
		return Event{ID: id, TSms: ts, Type: typ, TaskID: row.TaskID, Worker: row.Worker, Labels: labels, Payload: p}
	}
	return []Event{
		ev(l.ReceivedID, l.ReceivedMs, TypeTaskReceived, l.appendReceived(nil, row)),
		ev(l.ReceivedID+l.StartedDID, l.ReceivedMs+l.StartedDMs, TypeExecutorStarted, []byte(startedFirst)),
		ev(l.ReceivedID+l.FinishedDID, l.ReceivedMs+l.FinishedDMs, TypeExecutorFinished, l.appendFinished(nil, row)),
	}
}

// appendReceived appends task_received's payload as the worker emits it.
func (l Lifecycle) appendReceived(b []byte, row *TaskRow) []byte {
	p := Received{Source: row.Source, Alias: row.Alias, InputSizeBytes: l.InputSizeBytes, KeyEncoding: row.KeyEncoding}
	if row.Partition >= 0 {
		p.Partition, p.Offset = &row.Partition, &row.Offset
	}
	if row.KeyEncoding != "" {
		p.Key = row.Key
	}
	return p.AppendJSON(b)
}

// appendFinished appends a successful first attempt's executor_finished
// payload without its stdout tail, as the worker emits it.
func (l Lifecycle) appendFinished(b []byte, row *TaskRow) []byte {
	exit := 0
	return Attempt{Attempt: 1, Status: row.Status, ExitCode: &exit, DurationMS: l.AttemptDuration, OutputSizeBytes: row.OutputSizeBytes}.AppendJSON(b)
}

// Fold returns the Lifecycle of events for row when the events are exactly
// one received, one started and one finished (first attempt, ok, exit 0,
// no error, no stderr) and rebuilding them from it gives the same events
// (stdout tail aside).
func Fold(events []*Event, row *TaskRow) (Lifecycle, bool) {
	if len(events) != 3 || row.Status != "ok" || row.Attempts != 1 || row.Error != "" {
		return Lifecycle{}, false
	}
	rcv, st, fin := events[0], events[1], DropOKTail(events[2])
	if rcv.Type != TypeTaskReceived || st.Type != TypeExecutorStarted || fin.Type != TypeExecutorFinished {
		return Lifecycle{}, false
	}
	in, ok1 := intMember(rcv.Payload, "input_size_bytes")
	dur, ok2 := intMember(fin.Payload, "duration_ms")
	if !ok1 || !ok2 && bytes.Contains(fin.Payload, []byte(`"duration_ms"`)) {
		return Lifecycle{}, false
	}
	l := Lifecycle{
		ReceivedID: rcv.ID, StartedDID: st.ID - rcv.ID, FinishedDID: fin.ID - rcv.ID,
		ReceivedMs: rcv.TSms, StartedDMs: st.TSms - rcv.TSms, FinishedDMs: fin.TSms - rcv.TSms,
		InputSizeBytes: in, AttemptDuration: dur,
	}
	if l.ReceivedID <= 0 {
		return Lifecycle{}, false
	}
	// Rebuilding must give back exactly what was emitted.
	for _, e := range events {
		if e.Worker != row.Worker || e.Kind != "" || !maps.Equal(e.Labels, row.Labels) {
			return Lifecycle{}, false
		}
	}
	var buf [256]byte
	if !bytes.Equal(l.appendReceived(buf[:0], row), rcv.Payload) ||
		string(st.Payload) != startedFirst ||
		!bytes.Equal(l.appendFinished(buf[:0], row), fin.Payload) {
		return Lifecycle{}, false
	}
	return l, true
}

// intMember returns the integer value of member key in a JSON object p,
// scanning bytes; ok is false when it is absent or not a plain integer.
// Fold checks the whole payload afterwards, so a false match cannot misstate.
func intMember(p []byte, key string) (int64, bool) {
	i := bytes.Index(p, []byte(`"`+key+`":`))
	if i < 0 {
		return 0, false
	}
	rest := p[i+len(key)+3:]
	j := 0
	for j < len(rest) && (rest[j] == '-' || rest[j] >= '0' && rest[j] <= '9') {
		j++
	}
	v, err := strconv.ParseInt(string(rest[:j]), 10, 64)
	return v, err == nil
}

// DropOKTail returns e without the stdout tail when it is the
// executor_finished of a successful first attempt without stderr; other
// events are returned as they are.
func DropOKTail(e *Event) *Event {
	p := e.Payload
	if e.Type != TypeExecutorFinished || len(p) == 0 || p[len(p)-1] != '}' {
		return e
	}
	// Cut the tail bytewise (decoding it costs more than the rest of the
	// write): an unescaped `,"stdout_tail":"` can only be the key, and the
	// tail must be the last member.
	i := bytes.Index(p, tailKey)
	if i < 0 || !oneJSONString(p[i+len(tailKey)-1:len(p)-1]) {
		return e
	}
	head := p[:i]
	if !bytes.HasPrefix(head, []byte(`{"attempt":1,"status":"ok",`)) ||
		bytes.Contains(head, []byte(`"error":`)) || bytes.Contains(head, []byte(`"stderr_tail":`)) {
		return e
	}
	rest := make([]byte, 0, i+1)
	rest = append(append(rest, head...), '}')
	c := *e
	c.Payload = rest
	return &c
}

var tailKey = []byte(`,"stdout_tail":"`)

// oneJSONString reports whether b is exactly one JSON string literal: it
// opens and closes with a quote and holds no other unescaped quote.
func oneJSONString(b []byte) bool {
	if len(b) < 2 || b[0] != '"' {
		return false
	}
	j := 1
	for j < len(b)-1 {
		switch b[j] {
		case '\\':
			j += 2
			continue
		case '"':
			return false
		}
		j++
	}
	return j == len(b)-1 && b[j] == '"'
}
