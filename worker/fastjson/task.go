package fastjson

import (
	"slices"
	"strconv"

	"svc/worker/event"
)

// TaskHeader is the header of a task frame (worker → executor, protocol
// v2, docs/executor.md): what mode spawn passes as SVC_* variables.
type TaskHeader struct {
	Type        string            `json:"type"`
	TaskID      string            `json:"task_id"`
	Attempt     int               `json:"attempt"`
	Source      string            `json:"source"`
	TopicAlias  string            `json:"topic_alias"`
	Partition   int32             `json:"partition"`
	Offset      int64             `json:"offset"`
	Key         *string           `json:"key"`          // null: the message has no key
	KeyEncoding *string           `json:"key_encoding"` // null with a null key
	Labels      map[string]string `json:"labels"`
	Env         map[string]string `json:"env"`
}

// AppendTaskHeader appends json.Marshal(h) to dst, byte for byte
// (FuzzTaskHeader), without reflection: into the attempt's reused frame
// buffer, with no allocation but the sorted keys of a map. json.Marshal
// cost svc 3-8 % more worker CPU a Kafka message (bench/speed.sh A/B).
func AppendTaskHeader(dst []byte, h *TaskHeader) []byte {
	dst = event.AppendJSONString(append(dst, `{"type":`...), h.Type)
	dst = event.AppendJSONString(append(dst, `,"task_id":`...), h.TaskID)
	dst = strconv.AppendInt(append(dst, `,"attempt":`...), int64(h.Attempt), 10)
	dst = event.AppendJSONString(append(dst, `,"source":`...), h.Source)
	dst = event.AppendJSONString(append(dst, `,"topic_alias":`...), h.TopicAlias)
	dst = strconv.AppendInt(append(dst, `,"partition":`...), int64(h.Partition), 10)
	dst = strconv.AppendInt(append(dst, `,"offset":`...), h.Offset, 10)
	dst = appendStringOrNull(append(dst, `,"key":`...), h.Key)
	dst = appendStringOrNull(append(dst, `,"key_encoding":`...), h.KeyEncoding)
	dst = appendStrings(append(dst, `,"labels":`...), h.Labels)
	dst = appendStrings(append(dst, `,"env":`...), h.Env)
	return append(dst, '}')
}

func appendStringOrNull(dst []byte, s *string) []byte {
	if s == nil {
		return append(dst, "null"...)
	}
	return event.AppendJSONString(dst, *s)
}

// appendStrings appends m as json.Marshal does: keys sorted, nil as null.
func appendStrings(dst []byte, m map[string]string) []byte {
	if m == nil {
		return append(dst, "null"...)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	dst = append(dst, '{')
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(event.AppendJSONString(dst, k), ':')
		dst = event.AppendJSONString(dst, m[k])
	}
	return append(dst, '}')
}
