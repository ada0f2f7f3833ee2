package httpd

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"svc/worker"
	"svc/worker/kafka"
	"svc/worker/model"
	"svc/worker/payload"
)

// decodeJSON reads a JSON object body into v; unknown fields are errors.
func decodeJSON(r *http.Request, v any) error {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("invalid JSON body: %w", err)
	}
	return nil
}

// consumePauser is the Kafka source's consume pause (nil without one).
type consumePauser interface {
	PauseState() kafka.PauseState
	Pause(seconds int64) (kafka.PauseState, error)
	Resume() (kafka.PauseState, error)
}

// pauseState is the state object; without a Kafka source it is inactive
// and a pause or resume answers 503.
func (s *UIServer) pauseState() kafka.PauseState {
	if s.pause != nil {
		return s.pause.PauseState()
	}
	return kafka.PauseState{Enabled: s.cfg.UI.ConsumePause.Enabled, DurationsSeconds: append([]int{}, s.cfg.UI.ConsumePause.DurationsSeconds...)}
}

func (s *UIServer) consumePauseState(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.pauseState())
}

func (s *UIServer) consumePause(w http.ResponseWriter, r *http.Request) {
	var req struct {
		DurationSeconds json.RawMessage `json:"duration_seconds"`
	}
	if err := decodeJSON(r, &req); err != nil {
		bodyError(w, err)
		return
	}
	if len(req.DurationSeconds) == 0 || string(req.DurationSeconds) == "null" {
		writeError(w, http.StatusBadRequest, "bad_request", "duration_seconds is required: an integer from 1 to 3600")
		return
	}
	// A JSON number only: "30" (a string) is refused, not read as 30.
	secs, err := strconv.ParseInt(string(req.DurationSeconds), 10, 64)
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", fmt.Sprintf("duration_seconds must be an integer from 1 to 3600, got %s", cut(string(req.DurationSeconds), 40)))
		return
	}
	if s.pause == nil {
		s.pauseAnswer(w, s.pauseState(), kafka.ErrConsumerNotRunning)
		return
	}
	st, err := s.pause.Pause(secs)
	s.pauseAnswer(w, st, err)
}

func (s *UIServer) consumeResume(w http.ResponseWriter, r *http.Request) {
	if s.pause == nil {
		s.pauseAnswer(w, s.pauseState(), kafka.ErrConsumerNotRunning)
		return
	}
	st, err := s.pause.Resume()
	s.pauseAnswer(w, st, err)
}

func (s *UIServer) pauseAnswer(w http.ResponseWriter, st kafka.PauseState, err error) {
	switch {
	case err == nil:
		writeJSON(w, http.StatusOK, st)
	case errors.Is(err, kafka.ErrPauseDisabled):
		writeError(w, http.StatusForbidden, "feature_disabled", "ui.consume_pause.enabled is false")
	case errors.Is(err, kafka.ErrConsumerNotRunning):
		writeError(w, http.StatusServiceUnavailable, "consumer_not_running", err.Error())
	case errors.As(err, new(*kafka.DurationError)):
		writeError(w, http.StatusBadRequest, "bad_request", err.Error())
	default:
		writeError(w, http.StatusInternalServerError, "internal", err.Error())
	}
}

// ProbeHeader is a header of a probe request or Kafka record.
type ProbeHeader struct {
	Key           string  `json:"key"`
	Value         *string `json:"value"`
	ValueEncoding string  `json:"value_encoding,omitempty"`
}

// ProbeRequest is the body of POST /api/v1/debug/probe; payload is
// required (an empty message is "").
type ProbeRequest struct {
	Payload         *string           `json:"payload"`
	PayloadEncoding string            `json:"payload_encoding"`
	Key             *string           `json:"key"`
	KeyEncoding     string            `json:"key_encoding"`
	Headers         []ProbeHeader     `json:"headers"`
	Labels          map[string]string `json:"labels"`
}

// ProbeTask is one task result of a probe.
type ProbeTask struct {
	TaskID          string             `json:"task_id"`
	Status          string             `json:"status"`
	Attempts        int                `json:"attempts"`
	DurationMS      int64              `json:"duration_ms"`
	ExitCode        int                `json:"exit_code"`
	Error           string             `json:"error,omitempty"`
	Output          string             `json:"output"`
	OutputEncoding  string             `json:"output_encoding"`
	OutputTruncated bool               `json:"output_truncated"`
	Stderr          string             `json:"stderr"`
	StderrEncoding  string             `json:"stderr_encoding"`
	Labels          map[string]string  `json:"labels"`
	Annotations     []model.Annotation `json:"annotations"`
	// Data is stdout when it parses as JSON: the rows the probe details
	// render. Absent otherwise.
	Data json.RawMessage `json:"data,omitempty"`
}

// decode reads the request's encoded fields (an omitted encoding is
// utf-8); the error names the first bad one.
func (req *ProbeRequest) decode() (pr worker.ProbeRequest, err error) {
	field := func(name string, v *string, enc string) []byte {
		if v == nil || err != nil {
			return nil
		}
		if enc == "" {
			enc = payload.UTF8
		}
		b, derr := payload.Decode(*v, enc)
		if derr != nil {
			err = fmt.Errorf("%s %w", name, derr)
		}
		return b
	}
	pr = worker.ProbeRequest{Value: field("payload", req.Payload, req.PayloadEncoding), Labels: req.Labels}
	pr.Key = field("key", req.Key, req.KeyEncoding)
	for i, h := range req.Headers {
		value := field(fmt.Sprintf("headers[%d].value", i), h.Value, h.ValueEncoding)
		pr.Headers = append(pr.Headers, model.Header{Key: h.Key, Value: value})
	}
	return pr, err
}

func (s *UIServer) probe(w http.ResponseWriter, r *http.Request) {
	var req ProbeRequest
	if err := decodeJSON(r, &req); err != nil {
		bodyError(w, err)
		return
	}
	if req.Payload == nil {
		writeError(w, http.StatusBadRequest, "bad_request", `payload is required: the message to run, e.g. {"payload": "hello"} ("" for an empty message)`)
		return
	}
	pr, err := req.decode()
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	results, err := s.app.Probe(r.Context(), pr)
	if err != nil {
		if errors.Is(err, worker.ErrProbeQueueFull) {
			w.Header().Set("Retry-After", "1")
			writeError(w, http.StatusServiceUnavailable, "probe_queue_full", err.Error())
			return
		}
		if errors.Is(err, model.ErrExecutorUnavailable) { // the reason, as /readyz gives it
			w.Header().Set("Retry-After", executorRetryAfter)
			writeError(w, http.StatusServiceUnavailable, "executor_unavailable", err.Error())
			return
		}
		writeError(w, http.StatusUnprocessableEntity, "handler_error", err.Error())
		return
	}
	out := make([]ProbeTask, 0, len(results))
	for _, res := range results {
		pt := ProbeTask{TaskID: res.Task.ID, Status: res.Status, Attempts: res.Attempts, DurationMS: res.Duration.Milliseconds(),
			ExitCode: res.ExitCode, OutputTruncated: res.OutputTruncated, Labels: res.Labels, Annotations: nonNil(res.Annotations)}
		if res.Err != nil {
			pt.Error = res.Err.Error()
		}
		pt.Output, pt.OutputEncoding = payload.Encode(res.Output)
		if trimmed := bytes.TrimSpace(res.Output); len(trimmed) > 0 && !res.OutputTruncated && json.Valid(trimmed) {
			pt.Data = trimmed
		}
		pt.Stderr, pt.StderrEncoding = payload.Encode(res.Stderr)
		if pt.Labels == nil {
			pt.Labels = map[string]string{}
		}
		out = append(out, pt)
	}
	writeJSON(w, http.StatusOK, map[string]any{"tasks": out, "probe_details": s.details})
}
