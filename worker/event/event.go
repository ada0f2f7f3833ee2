// Package event is the worker's event vocabulary: the event record, its
// types, the payloads the worker emits and their one JSON codec. The
// worker, the executor, the flight recorder, /ws and the trace use it; it
// imports only the standard library.
package event

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"strconv"
)

// Event types the worker emits; docs/api.md (Flight recorder and history)
// says when each is written and what its payload holds.
const (
	TypeTaskReceived     = "task_received"
	TypeTaskArranged     = "task_arranged"
	TypeExecutorStarted  = "executor_started"
	TypeExecutorFinished = "executor_finished"
	TypeSinkDelivered    = "sink_delivered"
	TypeDLQSent          = "dlq_sent"
	TypeOffsetCommitted  = "offset_committed"
	TypeAnnotation       = "annotation"
	TypeRuntimeHealth    = "runtime_health"
	TypeCrashDetected    = "crash_detected"
	TypeState            = "state"
	TypeConfigSnapshot   = "config_snapshot"
)

// Types lists every event type, the accepted values of an events query's
// type filter.
func Types() []string {
	return []string{
		TypeTaskReceived, TypeTaskArranged, TypeExecutorStarted, TypeExecutorFinished, TypeSinkDelivered,
		TypeDLQSent, TypeOffsetCommitted, TypeAnnotation, TypeRuntimeHealth, TypeCrashDetected, TypeState,
		TypeConfigSnapshot,
	}
}

// Event is one recorded pipeline event. The recorder assigns ID, rising
// across restarts of one worker (archives and merged files carry their own
// row ids).
type Event struct {
	ID      int64             `json:"id"`
	TSms    int64             `json:"ts_ms"`
	Type    string            `json:"type"`
	Kind    string            `json:"kind"`
	TaskID  string            `json:"task_id"`
	Worker  string            `json:"worker"`
	Labels  map[string]string `json:"labels"`
	Payload json.RawMessage   `json:"payload"`
	// PayloadValid says Payload is valid JSON the emitter never changes:
	// the recorder then neither checks nor copies it (and clears the flag).
	PayloadValid bool `json:"-"`
}

// AppendJSON appends json.Marshal(e), byte for byte, without reflection
// (the Live stream's encoder). A payload json.Marshal would change goes
// through json.Marshal.
func (e *Event) AppendJSON(b []byte) ([]byte, error) {
	b = strconv.AppendInt(append(b, `{"id":`...), e.ID, 10)
	b = strconv.AppendInt(append(b, `,"ts_ms":`...), e.TSms, 10)
	b = AppendJSONString(append(b, `,"type":`...), e.Type)
	b = AppendJSONString(append(b, `,"kind":`...), e.Kind)
	b = AppendJSONString(append(b, `,"task_id":`...), e.TaskID)
	b = AppendJSONString(append(b, `,"worker":`...), e.Worker)
	b = append(b, `,"labels":`...)
	if e.Labels == nil {
		b = append(b, "null"...)
	} else {
		b = AppendStringMap(b, e.Labels)
	}
	b = append(b, `,"payload":`...)
	switch {
	case e.Payload == nil:
		b = append(b, "null"...)
	case payloadAsIs(e.Payload):
		b = append(b, e.Payload...)
	default:
		q, err := json.Marshal(e.Payload)
		if err != nil {
			return b, err
		}
		b = append(b, q...)
	}
	return append(b, '}'), nil
}

// payloadAsIs reports whether json.Marshal of the raw JSON p gives p
// itself: one object or array without whitespace outside strings, HTML
// characters, U+2028/U+2029 or control bytes. It does not check the
// grammar: the recorder only stores valid JSON.
func payloadAsIs(p []byte) bool {
	if len(p) < 2 || (p[0] != '{' && p[0] != '[') {
		return false
	}
	in := false
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case c < 0x20 || c == '<' || c == '>' || c == '&':
			return false
		case c == 0xe2 && i+2 < len(p) && p[i+1] == 0x80 && (p[i+2] == 0xa8 || p[i+2] == 0xa9):
			return false
		case in && c == '\\':
			i++ // the escaped byte
		case c == '"':
			in = !in
		case !in && c == ' ':
			return false
		}
	}
	return !in
}

// AppendStringMap appends json.Marshal(m), byte for byte (keys sorted,
// HTML characters escaped), without reflection.
func AppendStringMap(b []byte, m map[string]string) []byte {
	b = append(b, '{')
	for i, k := range slices.Sorted(maps.Keys(m)) {
		if i > 0 {
			b = append(b, ',')
		}
		b = AppendJSONString(append(AppendJSONString(b, k), ':'), m[k])
	}
	return append(b, '}')
}

// AppendJSONString appends s as json.Marshal encodes a string; plain
// printable ASCII goes directly, anything else through encoding/json
// (FuzzAppendJSONString). This is the tree's one JSON string escaper.
func AppendJSONString(b []byte, s string) []byte { return appendJSONString(b, s, true) }

// AppendJSONStringNoHTML appends s as an Encoder with SetEscapeHTML(false)
// does (the ingress's answers).
func AppendJSONStringNoHTML(b []byte, s string) []byte { return appendJSONString(b, s, false) }

func appendJSONString(b []byte, s string, html bool) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || html && (c == '<' || c == '>' || c == '&') {
			var buf bytes.Buffer
			enc := json.NewEncoder(&buf)
			enc.SetEscapeHTML(html)
			_ = enc.Encode(s) // a string always encodes
			return append(b, bytes.TrimSuffix(buf.Bytes(), []byte("\n"))...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// Routine tells the events of successful work, which a Live subscriber
// may be sampled out of.
func Routine(e *Event) bool {
	switch e.Type {
	case TypeTaskReceived, TypeExecutorStarted, TypeSinkDelivered, TypeOffsetCommitted:
		return true
	case TypeExecutorFinished:
		return bytes.Contains(e.Payload, []byte(`"status":"ok"`)) && !bytes.Contains(e.Payload, []byte(`"stderr_tail":`))
	case TypeRuntimeHealth:
		return e.Kind == "sample"
	}
	return false
}

// RoutineTask tells the row of a task that succeeded at its first attempt
// (a probe's row is never routine).
func RoutineTask(t *TaskRow) bool {
	return t.Status == "ok" && t.Attempts <= 1 && t.Source != "probe"
}
