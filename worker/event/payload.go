package event

import "strconv"

// The payloads of the per-task events, encoded by hand: each AppendJSON
// gives exactly the bytes json.Marshal gives (FuzzPayloadAppenders), so a
// task's payloads cost the worker no reflection and no interface boxing.

// Received is the payload of task_received.
type Received struct {
	Source         string `json:"source,omitempty"`
	Alias          string `json:"alias,omitempty"`
	Partition      *int32 `json:"partition,omitempty"`
	Offset         *int64 `json:"offset,omitempty"`
	Key            string `json:"key,omitempty"`
	KeyEncoding    string `json:"key_encoding,omitempty"`
	InputSizeBytes int64  `json:"input_size_bytes"`
}

// AppendJSON appends json.Marshal(p).
func (p Received) AppendJSON(b []byte) []byte {
	b = append(b, '{')
	if p.Source != "" {
		b = append(AppendJSONString(append(b, `"source":`...), p.Source), ',')
	}
	if p.Alias != "" {
		b = append(AppendJSONString(append(b, `"alias":`...), p.Alias), ',')
	}
	if p.Partition != nil {
		b = append(strconv.AppendInt(append(b, `"partition":`...), int64(*p.Partition), 10), ',')
	}
	if p.Offset != nil {
		b = append(strconv.AppendInt(append(b, `"offset":`...), *p.Offset, 10), ',')
	}
	if p.Key != "" {
		b = append(AppendJSONString(append(b, `"key":`...), p.Key), ',')
	}
	if p.KeyEncoding != "" {
		b = append(AppendJSONString(append(b, `"key_encoding":`...), p.KeyEncoding), ',')
	}
	b = strconv.AppendInt(append(b, `"input_size_bytes":`...), p.InputSizeBytes, 10)
	return append(b, '}')
}

// Attempt is the payload of executor_started and executor_finished.
type Attempt struct {
	Attempt         int    `json:"attempt"`
	Status          string `json:"status,omitempty"`
	ExitCode        *int   `json:"exit_code,omitempty"`
	DurationMS      int64  `json:"duration_ms,omitempty"`
	OutputSizeBytes int64  `json:"output_size_bytes,omitempty"`
	Error           string `json:"error,omitempty"`
	StderrTail      string `json:"stderr_tail,omitempty"`
	// StdoutTail is the end of stdout, for the Live page's task panel.
	StdoutTail string `json:"stdout_tail,omitempty"`
}

// AppendJSON appends json.Marshal(p).
func (p Attempt) AppendJSON(b []byte) []byte {
	b = strconv.AppendInt(append(b, `{"attempt":`...), int64(p.Attempt), 10)
	if p.Status != "" {
		b = AppendJSONString(append(b, `,"status":`...), p.Status)
	}
	if p.ExitCode != nil {
		b = strconv.AppendInt(append(b, `,"exit_code":`...), int64(*p.ExitCode), 10)
	}
	if p.DurationMS != 0 {
		b = strconv.AppendInt(append(b, `,"duration_ms":`...), p.DurationMS, 10)
	}
	if p.OutputSizeBytes != 0 {
		b = strconv.AppendInt(append(b, `,"output_size_bytes":`...), p.OutputSizeBytes, 10)
	}
	if p.Error != "" {
		b = AppendJSONString(append(b, `,"error":`...), p.Error)
	}
	if p.StderrTail != "" {
		b = AppendJSONString(append(b, `,"stderr_tail":`...), p.StderrTail)
	}
	if p.StdoutTail != "" {
		b = AppendJSONString(append(b, `,"stdout_tail":`...), p.StdoutTail)
	}
	return append(b, '}')
}

// Delivered is the payload of sink_delivered, its keys in sorted order.
type Delivered struct {
	OutputSizeBytes int64  `json:"output_size_bytes"`
	Sink            string `json:"sink"`
}

// AppendJSON appends json.Marshal(p).
func (p Delivered) AppendJSON(b []byte) []byte {
	b = strconv.AppendInt(append(b, `{"output_size_bytes":`...), p.OutputSizeBytes, 10)
	return append(AppendJSONString(append(b, `,"sink":`...), p.Sink), '}')
}
