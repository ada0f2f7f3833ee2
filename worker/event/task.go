package event

import "encoding/json"

// TaskRow is one task result; docs/api.md (Task row) describes its JSON.
// Partition and Offset are -1 outside Kafka; KeyEncoding is "utf-8",
// "base64", or "" for a message without a key.
type TaskRow struct {
	TaskID          string            `json:"task_id"`
	TSms            int64             `json:"ts_ms"`
	Worker          string            `json:"worker,omitempty"`
	Source          string            `json:"source"` // kafka, http, probe
	Alias           string            `json:"alias"`
	Partition       int32             `json:"partition"`
	Offset          int64             `json:"offset"`
	Key             string            `json:"key"`
	KeyEncoding     string            `json:"key_encoding"`
	Labels          map[string]string `json:"labels"`
	Status          string            `json:"status"` // ok, failed, timeout, tempfail, dlq, ...
	Attempts        int               `json:"attempts"`
	DurationMs      int64             `json:"duration_ms"`
	Error           string            `json:"error"`
	OutputSizeBytes int64             `json:"output_size_bytes"`
	Env             map[string]string `json:"env"`

	// Deliveries is how many sink_delivered events follow an ok row (a
	// recorder may wait for them); never stored.
	Deliveries int `json:"-"`
}

// MarshalJSON writes key and key_encoding as null for a message without a
// key, and env as {} when empty.
func (t TaskRow) MarshalJSON() ([]byte, error) {
	type plain TaskRow
	out := struct {
		plain
		Key         *string           `json:"key"`
		KeyEncoding *string           `json:"key_encoding"`
		Env         map[string]string `json:"env"`
	}{plain: plain(t), Env: t.Env}
	if t.KeyEncoding != "" {
		out.Key, out.KeyEncoding = &t.Key, &t.KeyEncoding
	}
	if out.Env == nil {
		out.Env = map[string]string{}
	}
	return json.Marshal(out)
}
