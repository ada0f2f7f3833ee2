package executor

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"svc/worker/fastjson"
	"svc/worker/model"
	"svc/worker/payload"
)

// Protocol v2 frames (docs/executor.md, "Frames"): a 4-byte big-endian
// length, a JSON header line ending in '\n', then the raw body.
const (
	frameTypeTask   = "task"
	frameTypeReady  = "ready"
	frameTypeResult = "result"
	maxHeaderBytes  = 1 << 20 // a result frame's header line
	maxErrorText    = 1 << 10 // the executor's error text kept in a result
)

// Frame errors; each one makes the child unusable (it is replaced).
var (
	errFrameTooLarge = errors.New("frame too large")
	errFrameProtocol = errors.New("executor protocol")
	// errFrameText (with errFrameProtocol): text where a length should be.
	errFrameText = errors.New("frame length prefix is text")
)

// resultHeader is the header of a ready or result frame, its entries
// kept raw to be decoded one by one.
type resultHeader struct {
	resultTop
	Annotations []json.RawMessage `json:"annotations"`
	Labels      map[string]any    `json:"labels"`
	Cache       []json.RawMessage `json:"cache"`
}

// resultTop is the part of a result header that is not entries (a field
// of its own: decoding errors name it, as in resultHeader.resultTop.type).
type resultTop struct {
	Type    string `json:"type"`
	TaskID  string `json:"task_id"`
	Attempt int    `json:"attempt"`
	Status  string `json:"status"`
	Error   string `json:"error"`
}

// encodeTask appends the task frame of attempt n of t to dst.
func encodeTask(dst []byte, t *model.Task, n int) ([]byte, error) {
	h := fastjson.TaskHeader{Type: frameTypeTask, TaskID: t.ID, Attempt: n, Labels: t.Labels, Env: t.Env}
	if h.Labels == nil {
		h.Labels = noStrings
	}
	if h.Env == nil {
		h.Env = noStrings
	}
	var key, enc string
	if m := t.Msg; m != nil {
		h.Source, h.TopicAlias, h.Partition, h.Offset = m.Source, m.Alias, m.Partition, m.Offset
		if m.Key != nil {
			key, enc = payload.EncodeEnv(m.Key)
			h.Key, h.KeyEncoding = &key, &enc
		}
	}
	at := len(dst)
	dst = fastjson.AppendTaskHeader(append(dst, 0, 0, 0, 0), &h)
	dst = append(append(dst, '\n'), t.Input...)
	n64 := int64(len(dst) - at - 4)
	if n64 > 1<<32-1 {
		return dst[:at], fmt.Errorf("encode task frame: input of %d bytes does not fit a frame", len(t.Input))
	}
	binary.BigEndian.PutUint32(dst[at:], uint32(n64))
	return dst, nil
}

// noStrings is an empty map, which json.Marshal writes as {} (nil as null).
var noStrings = map[string]string{}

// readFrame reads one frame from r and splits it into header and body.
// A body over maxBody fails with errFrameTooLarge (the body cut to maxBody,
// or empty when the length alone was too large); a frame without a header
// line fails with errFrameProtocol. io.EOF means the stream ended before
// the frame, io.ErrUnexpectedEOF inside it.
func readFrame(r *bufio.Reader, maxBody int64) (header, body []byte, err error) {
	var lb [4]byte
	if _, err := io.ReadFull(r, lb[:]); err != nil {
		return nil, nil, err
	}
	n := int64(binary.BigEndian.Uint32(lb[:]))
	if n > maxBody+maxHeaderBytes+1 {
		if looksLikeText(lb[:]) {
			return nil, nil, fmt.Errorf("%w: %w %q: is the executor speaking protocol v2?", errFrameProtocol, errFrameText, lb[:])
		}
		return nil, nil, fmt.Errorf("%w: frame of %d bytes", errFrameTooLarge, n)
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(r, buf); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, nil, err
	}
	i := bytes.IndexByte(buf, '\n')
	switch {
	case i < 0 || i > maxHeaderBytes:
		return nil, nil, fmt.Errorf("%w: frame of %d bytes has no header line of at most %d bytes", errFrameProtocol, n, maxHeaderBytes)
	case int64(len(buf)-i-1) > maxBody:
		return buf[:i], buf[i+1 : int64(i+1)+maxBody], fmt.Errorf("%w: body of %d bytes", errFrameTooLarge, len(buf)-i-1)
	}
	return buf[:i], buf[i+1:], nil
}

// looksLikeText reports whether a length prefix is printable text.
func looksLikeText(b []byte) bool {
	for _, c := range b {
		if (c < 0x20 || c > 0x7e) && c != '\n' && c != '\r' && c != '\t' {
			return false
		}
	}
	return true
}

// echo is the task_id and attempt a result names (zero when left out).
type echo struct {
	taskID  string
	attempt int
}

// missing names the fields the echo lacks.
func (e echo) missing() string {
	switch {
	case e.taskID == "" && e.attempt == 0:
		return "task_id and no attempt"
	case e.taskID == "":
		return "task_id"
	}
	return "attempt"
}

// namesOther reports whether the echo names a task other than attempt n of
// task id (a missing field names nothing).
func (e echo) namesOther(id string, n int) bool {
	return (e.taskID != "" && e.taskID != id) || (e.attempt != 0 && e.attempt != n)
}

// parseResult decodes a result frame's header into res (bad entries
// ignored and counted as on fd 3) and returns the task it names.
func parseResult(header []byte, res *model.AttemptResult) (echo, error) {
	var f fastjson.Result
	if fastjson.DecodeResult(header, &f) != nil {
		var err error
		if f, err = decodeByEntry(header); err != nil {
			return echo{}, err
		}
	}
	return applyResult(&f, res)
}

// applyResult applies a decoded result header to res.
func applyResult(f *fastjson.Result, res *model.AttemptResult) (echo, error) {
	if f.Type != frameTypeResult {
		return echo{}, fmt.Errorf("%w: frame type %q, want %q", errFrameProtocol, f.Type, frameTypeResult)
	}
	text := f.Error
	if len(text) > maxErrorText {
		text = text[:maxErrorText] + "…"
	}
	switch f.Status {
	case "ok":
		res.Status, res.ExitCode = model.StatusOK, 0
	case "retry":
		res.Status, res.ExitCode = model.StatusTempFail, 75
		res.Err = errors.New("executor answered status retry")
	case "failed":
		res.Status, res.ExitCode = model.StatusFailed, 1
		res.Err = errors.New("executor answered status failed")
	default:
		return echo{}, fmt.Errorf("%w: result status %q is not one of ok, retry, failed", errFrameProtocol, f.Status)
	}
	if res.Err != nil && text != "" {
		res.Err = fmt.Errorf("%w: %s", res.Err, text)
	}
	var e events
	for i := range f.Annotations {
		e.entry(func() bool { return e.applyLine(eventLine{Annotation: (*model.Annotation)(&f.Annotations[i])}) })
	}
	for k, v := range f.Labels {
		e.entry(func() bool { return v != nil && e.applyLine(eventLine{Labels: map[string]string{k: *v}}) })
	}
	for i := range f.Cache {
		e.entry(func() bool { return e.applyLine(eventLine{Cache: (*model.CacheWrite)(&f.Cache[i])}) })
	}
	res.Annotations, res.Labels, res.CacheWrites, res.InvalidEvents = e.result()
	return echo{taskID: f.TaskID, attempt: f.Attempt}, nil
}

// decodeByEntry decodes a header with an entry of the wrong shape entry by
// entry, so only that entry is lost: it is left zero (a label nil), which
// applyLine refuses.
func decodeByEntry(header []byte) (fastjson.Result, error) {
	var h resultHeader
	if err := json.Unmarshal(header, &h); err != nil {
		return fastjson.Result{}, fmt.Errorf("%w: result header is not JSON: %v", errFrameProtocol, err)
	}
	f := fastjson.Result{Type: h.Type, TaskID: h.TaskID, Attempt: h.Attempt, Status: h.Status, Error: h.Error,
		Annotations: make([]fastjson.Annotation, len(h.Annotations)), Cache: make([]fastjson.CacheWrite, len(h.Cache)),
		Labels: make(map[string]*string, len(h.Labels))}
	for i, raw := range h.Annotations {
		if json.Unmarshal(raw, &f.Annotations[i]) != nil {
			f.Annotations[i] = fastjson.Annotation{}
		}
	}
	for k, v := range h.Labels {
		if s, ok := v.(string); ok {
			f.Labels[k] = &s
		} else {
			f.Labels[k] = nil
		}
	}
	for i, raw := range h.Cache {
		if json.Unmarshal(raw, &f.Cache[i]) != nil {
			f.Cache[i] = fastjson.CacheWrite{}
		}
	}
	return f, nil
}
