// Command echo-go is a complete persistent-mode executor (protocol v2): it
// answers every task with its payload unchanged and notes the size in an
// annotation. An input starting with "fail" is answered with status failed.
//
// Build: go build -o echo-go ./testdata/executors/echo-go
// Config: [executor] binary_path = "/path/to/echo-go", mode = "persistent"
package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"
)

// task is the header of a task frame.
type task struct {
	Type        string            `json:"type"`
	TaskID      string            `json:"task_id"`
	Attempt     int               `json:"attempt"`
	Source      string            `json:"source"`
	TopicAlias  string            `json:"topic_alias"`
	Partition   int32             `json:"partition"`
	Offset      int64             `json:"offset"`
	Key         string            `json:"key"`
	KeyEncoding string            `json:"key_encoding"`
	Labels      map[string]string `json:"labels"`
	Env         map[string]string `json:"env"`
}

// result is the header of a result frame. TaskID and Attempt, copied from
// the task, prove to the worker which task it answers (required: the
// worker takes no result without them).
type result struct {
	Type        string            `json:"type"`
	TaskID      string            `json:"task_id"`
	Attempt     int               `json:"attempt"`
	Status      string            `json:"status"`
	Error       string            `json:"error,omitempty"`
	Annotations []annotation      `json:"annotations,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
}

type annotation struct {
	Kind    string         `json:"kind"`
	Payload map[string]any `json:"payload"`
}

func main() {
	in := bufio.NewReaderSize(os.Stdin, 64<<10)
	out := bufio.NewWriterSize(os.Stdout, 64<<10)
	if err := writeFrame(out, map[string]string{"type": "ready"}, nil); err != nil {
		os.Exit(1)
	}
	for {
		header, payload, err := readFrame(in)
		if err == io.EOF {
			return // the worker is done with this process
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "echo-go: read frame:", err)
			os.Exit(1)
		}
		var t task
		if err := json.Unmarshal(header, &t); err != nil || t.Type != "task" {
			fmt.Fprintln(os.Stderr, "echo-go: bad task header")
			os.Exit(1)
		}
		res := result{Type: "result", TaskID: t.TaskID, Attempt: t.Attempt, Status: "ok", Annotations: []annotation{
			{Kind: "echo.size", Payload: map[string]any{"bytes": len(payload), "attempt": t.Attempt}},
		}}
		body := payload
		if bytes.HasPrefix(payload, []byte("fail")) {
			fmt.Fprintf(os.Stderr, "task %s asked to fail\n", t.TaskID) // kept as this task's stderr
			res.Status, res.Error, body = "failed", "the message asked to fail", nil
		}
		if err := writeFrame(out, res, body); err != nil {
			os.Exit(1)
		}
	}
}

// readFrame reads [4-byte big-endian length][header line \n][body].
func readFrame(r *bufio.Reader) (header, body []byte, err error) {
	var n uint32
	if err := binary.Read(r, binary.BigEndian, &n); err != nil {
		return nil, nil, err // io.EOF between frames
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(r, buf); err != nil {
		return nil, nil, err
	}
	i := bytes.IndexByte(buf, '\n')
	if i < 0 {
		return nil, nil, fmt.Errorf("frame without a header line")
	}
	return buf[:i], buf[i+1:], nil
}

// writeFrame writes one frame and flushes it: the worker waits for it.
// Nothing else may go to stdout (log to stderr).
func writeFrame(w *bufio.Writer, header any, body []byte) error {
	h, err := json.Marshal(header)
	if err != nil {
		return err
	}
	if err := binary.Write(w, binary.BigEndian, uint32(len(h)+1+len(body))); err != nil {
		return err
	}
	w.Write(h)
	w.WriteByte('\n')
	w.Write(body)
	return w.Flush()
}
