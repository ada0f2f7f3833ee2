package model

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"time"
)

// Source names where a message came from (SVC_SOURCE, task "source").
const (
	SourceKafka = "kafka"
	SourceHTTP  = "http"
	SourceProbe = "probe"
)

// Task statuses as reported in results, metrics and the recorder.
const (
	StatusOK       = "ok"
	StatusFailed   = "failed"
	StatusTimeout  = "timeout"
	StatusTempFail = "tempfail"
)

// Header is one Kafka record header; a nil Value is a null value.
type Header struct {
	Key   string
	Value []byte
}

// Message is one unit of input; Topic never leaves the worker (operators
// see Alias).
type Message struct {
	Source    string
	Alias     string
	Topic     string
	Partition int32
	Offset    int64
	Key       []byte
	Value     []byte
	Headers   []Header
	Timestamp time.Time
}

// Task is one executor run arranged from a message.
type Task struct {
	ID     string
	Msg    *Message
	Input  []byte            // bytes written to the executor's stdin
	Labels map[string]string // SVC_LABEL_<NAME> and recorder labels
	Env    map[string]string // extra environment for this task only
	// Sinks names the sinks the result goes to; nil means every sink.
	Sinks []string

	RequestID string // the ingress request's id (HTTP source), for RunningTasks
	attempt   int32  // the attempt running now, negated once it ended (atomic)
}

// Annotation is a structured note a task attaches to its trace (fd 3 or
// handler code); Payload is a JSON object, kept as written.
type Annotation struct {
	Kind    string          `json:"kind"`
	Payload json.RawMessage `json:"payload"`
}

// AnnotationPayload encodes v (a map or struct) as an annotation payload.
func AnnotationPayload(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		b, _ = json.Marshal(map[string]string{"encode_error": err.Error()})
	}
	return b
}

// CacheWrite is a handler-cache write requested by an executor over fd 3.
type CacheWrite struct {
	Key   string `json:"key"`
	Value string `json:"value"`
	Scope string `json:"scope"`
}

// TaskResult is the outcome of a task after all its attempts.
type TaskResult struct {
	Task            *Task
	Status          string // StatusOK, StatusFailed or StatusTimeout
	Output          []byte // stdout, at most executor.max_output_bytes
	OutputTruncated bool
	Stderr          []byte // last 8 KiB of stderr
	ExitCode        int    // -1 when the process did not exit by itself
	Attempts        int
	Duration        time.Duration // wall time of all attempts
	Err             error         // nil when Status is ok
	Annotations     []Annotation
	Labels          map[string]string // task labels merged with fd 3 labels
	CacheWrites     []CacheWrite
}

// AttemptResult is the outcome of one executor process.
type AttemptResult struct {
	Status          string // StatusOK, StatusFailed, StatusTimeout or StatusTempFail
	Output          []byte // stdout, at most executor.max_output_bytes
	OutputTruncated bool   // stdout went over executor.max_output_bytes (Status is failed)
	Stderr          []byte // the tail of stderr
	ExitCode        int    // -1 when the process did not exit by itself
	Err             error  // nil when Status is ok
	Duration        time.Duration
	// Annotations, Labels and CacheWrites come from fd 3; ignored fd 3
	// lines are counted in InvalidEvents.
	Annotations   []Annotation
	Labels        map[string]string
	CacheWrites   []CacheWrite
	InvalidEvents int
}

// Handler arranges polled Kafka batches into tasks; never concurrently.
type Handler interface {
	Arrange(batch []Message) ([]Task, error)
}

// HTTPRequest is the request model handed to an HTTP handler.
type HTTPRequest struct {
	ID     string
	Client string // ingress client name, "" when unauthenticated
	Body   []byte
	Key    []byte
	Labels map[string]string
	Header http.Header
}

// HTTPResponse is the response model an HTTP handler returns (Body: JSON).
type HTTPResponse struct {
	Status int
	Body   any
}

// HTTPArranger turns an ingress request into tasks; called concurrently.
type HTTPArranger interface {
	ArrangeHTTPRequest(req *HTTPRequest) ([]Task, error)
}

// HTTPCompleter builds the ingress response from a request's results.
type HTTPCompleter interface {
	OnHTTPRequestComplete(req *HTTPRequest, results []TaskResult) (*HTTPResponse, error)
}

// MissingHooksError says a handler lacks the hooks the enabled sources need.
type MissingHooksError struct {
	Handler string
	Missing []string
	Reason  string
}

func (e *MissingHooksError) Error() string {
	return fmt.Sprintf("configuration error: handler %s lacks %s, required %s", e.Handler, strings.Join(e.Missing, " and "), e.Reason)
}

// Fields decodes the payload; nil when it is not a JSON object.
func (a Annotation) Fields() map[string]any {
	var m map[string]any
	if json.Unmarshal(a.Payload, &m) != nil {
		return nil
	}
	return m
}

// RunningAttempt is the executor attempt running now, or the last one with
// ended true once it ended (until the next one starts).
func (t *Task) RunningAttempt() (n int, ended bool) {
	v := int(atomic.LoadInt32(&t.attempt))
	return max(v, -v), v < 0
}
