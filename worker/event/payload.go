package event

import "strconv"

// The per-task payloads are encoded by hand: each AppendJSON gives exactly
// the bytes json.Marshal gives (FuzzPayloadAppenders) without reflection.

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
	b = appendString(b, `,"source":`, p.Source)
	b = appendString(b, `,"alias":`, p.Alias)
	if p.Partition != nil {
		b = appendInt(b, `,"partition":`, int64(*p.Partition))
	}
	if p.Offset != nil {
		b = appendInt(b, `,"offset":`, *p.Offset)
	}
	b = appendString(b, `,"key":`, p.Key)
	b = appendString(b, `,"key_encoding":`, p.KeyEncoding)
	b = appendInt(b, `,"input_size_bytes":`, p.InputSizeBytes)
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
	b = appendInt(append(b, '{'), `,"attempt":`, int64(p.Attempt))
	b = appendString(b, `,"status":`, p.Status)
	if p.ExitCode != nil {
		b = appendInt(b, `,"exit_code":`, int64(*p.ExitCode))
	}
	if p.DurationMS != 0 {
		b = appendInt(b, `,"duration_ms":`, p.DurationMS)
	}
	if p.OutputSizeBytes != 0 {
		b = appendInt(b, `,"output_size_bytes":`, p.OutputSizeBytes)
	}
	b = appendString(b, `,"error":`, p.Error)
	b = appendString(b, `,"stderr_tail":`, p.StderrTail)
	b = appendString(b, `,"stdout_tail":`, p.StdoutTail)
	return append(b, '}')
}

// Delivered is the payload of sink_delivered, its keys in sorted order.
type Delivered struct {
	OutputSizeBytes int64  `json:"output_size_bytes"`
	Sink            string `json:"sink"`
}

// AppendJSON appends json.Marshal(p).
func (p Delivered) AppendJSON(b []byte) []byte {
	b = appendInt(append(b, '{'), `,"output_size_bytes":`, p.OutputSizeBytes)
	return append(AppendJSONString(appendKey(b, `,"sink":`), p.Sink), '}')
}

// appendKey appends the member prefix m (`,"key":`), without its comma
// right after the object's '{'.
func appendKey(b []byte, m string) []byte {
	if b[len(b)-1] == '{' {
		m = m[1:]
	}
	return append(b, m...)
}

// appendString appends member m with value v unless v is empty (omitempty).
func appendString(b []byte, m, v string) []byte {
	if v == "" {
		return b
	}
	return AppendJSONString(appendKey(b, m), v)
}

func appendInt(b []byte, m string, v int64) []byte {
	return strconv.AppendInt(appendKey(b, m), v, 10)
}
