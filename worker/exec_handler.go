package worker

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"svc/worker/config"
	"svc/worker/model"
	"svc/worker/payload"
)

// ExecHandler is the built-in handler: one task per message, the message
// bytes as the executor's stdin, labels from svc-label-* headers and from the
// top-level JSON fields named in handler.label_fields. It implements Handler,
// HTTPArranger and HTTPCompleter and is safe for concurrent use. Its UI
// declarations (handler.ui_pages, handler.probe_details) are read by the
// composition root, not here.
type ExecHandler struct {
	labelFields []string
	ids         *IDGen
}

// NewExecHandler returns the built-in exec handler.
func NewExecHandler(cfg *config.Config, ids *IDGen) *ExecHandler {
	return &ExecHandler{labelFields: cfg.Handler.LabelFields, ids: ids}
}

// Arrange makes one task per Kafka message.
func (h *ExecHandler) Arrange(batch []model.Message) ([]model.Task, error) {
	tasks := make([]model.Task, 0, len(batch))
	for i := range batch {
		m := &batch[i]
		labels := h.jsonLabels(m.Value)
		for _, hd := range m.Headers {
			if name, ok := strings.CutPrefix(strings.ToLower(hd.Key), model.LabelHeaderPrefix); ok && name != "" && utf8.Valid(hd.Value) {
				labels = setLabel(labels, name, string(hd.Value))
			}
		}
		tasks = append(tasks, model.Task{ID: h.ids.Next(), Msg: m, Input: m.Value, Labels: labels})
	}
	return tasks, nil
}

// ArrangeHTTPRequest makes one task from the request body.
func (h *ExecHandler) ArrangeHTTPRequest(req *model.HTTPRequest) ([]model.Task, error) {
	labels := h.jsonLabels(req.Body)
	for k, v := range req.Labels {
		labels = setLabel(labels, k, v)
	}
	msg := &model.Message{Source: model.SourceHTTP, Key: req.Key, Value: req.Body, Timestamp: time.Now()}
	return []model.Task{{ID: h.ids.Next(), Msg: msg, Input: req.Body, Labels: labels}}, nil
}

// ExecResponse is the exec handler's ingress response body.
type ExecResponse struct {
	RequestID string           `json:"request_id"`
	Status    string           `json:"status"`
	Error     string           `json:"error,omitempty"`
	Tasks     []ExecTaskResult `json:"tasks"`
}

// ExecTaskResult is one task in an ExecResponse.
type ExecTaskResult struct {
	TaskID         string `json:"task_id"`
	Status         string `json:"status"`
	Output         string `json:"output"`
	OutputEncoding string `json:"output_encoding"`
	DurationMS     int64  `json:"duration_ms"`
	Attempts       int    `json:"attempts"`
	Error          string `json:"error,omitempty"`
}

// OnHTTPRequestComplete answers 200 when every task is ok, 504 when one
// timed out, else 502.
func (h *ExecHandler) OnHTTPRequestComplete(req *model.HTTPRequest, results []model.TaskResult) (*model.HTTPResponse, error) {
	resp := ExecResponse{RequestID: req.ID, Status: model.StatusOK, Tasks: make([]ExecTaskResult, 0, len(results))}
	code := http.StatusOK
	for _, r := range results {
		out, enc := payload.Encode(r.Output)
		tr := ExecTaskResult{
			TaskID: r.Task.ID, Status: r.Status, Output: out, OutputEncoding: enc,
			DurationMS: r.Duration.Milliseconds(), Attempts: r.Attempts,
		}
		if r.Err != nil {
			tr.Error = r.Err.Error()
		}
		switch r.Status {
		case model.StatusOK:
		case model.StatusTimeout:
			code, resp.Status, resp.Error = http.StatusGatewayTimeout, model.StatusTimeout, tr.Error
		default:
			if code != http.StatusGatewayTimeout {
				code, resp.Status, resp.Error = http.StatusBadGateway, model.StatusFailed, tr.Error
			}
		}
		resp.Tasks = append(resp.Tasks, tr)
	}
	return &model.HTTPResponse{Status: code, Body: resp}, nil
}

// jsonLabels reads handler.label_fields from a JSON object body (numbers
// and booleans in their JSON form).
func (h *ExecHandler) jsonLabels(body []byte) map[string]string {
	if len(h.labelFields) == 0 || len(body) == 0 || body[0] != '{' {
		return nil
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(body, &obj) != nil {
		return nil
	}
	var labels map[string]string
	for _, f := range h.labelFields {
		raw, ok := obj[f]
		if !ok {
			continue
		}
		var s string
		if json.Unmarshal(raw, &s) == nil {
			labels = setLabel(labels, f, s)
		} else if len(raw) > 0 && raw[0] != '{' && raw[0] != '[' && string(raw) != "null" {
			labels = setLabel(labels, f, string(raw))
		}
	}
	return labels
}

func setLabel(m map[string]string, k, v string) map[string]string {
	if m == nil {
		m = map[string]string{}
	}
	m[k] = v
	return m
}

// IDGen makes fleet-unique task and request ids: a random prefix and a
// counter. Safe for concurrent use.
type IDGen struct {
	prefix string
	n      atomic.Uint64
}

// NewIDGen returns a generator with a fresh random prefix.
func NewIDGen() *IDGen {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return &IDGen{prefix: hex.EncodeToString(b[:])}
}

// Next returns the next id, "<prefix>-<n>", in one allocation.
func (g *IDGen) Next() string {
	var b [32]byte // 12 hex digits, '-', at most 20 digits
	out := append(append(b[:0], g.prefix...), '-')
	return string(strconv.AppendUint(out, g.n.Add(1), 10))
}
