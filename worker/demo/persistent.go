package demo

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// executePersistent is the demo executor in mode persistent: a ready
// frame, then one result frame per task frame until EOF (protocol v2, see
// docs/executor.md).
func executePersistent(stdin io.Reader, stdout, stderr io.Writer) int {
	in, out := bufio.NewReader(stdin), bufio.NewWriter(stdout)
	if writeFrame(out, map[string]any{"type": "ready"}, nil) != nil {
		return 1
	}
	for {
		var n uint32
		if err := binary.Read(in, binary.BigEndian, &n); err != nil {
			if errors.Is(err, io.EOF) {
				return 0
			}
			fmt.Fprintln(stderr, "exec-demo: read frame:", err)
			return 1
		}
		frame := make([]byte, n)
		if _, err := io.ReadFull(in, frame); err != nil {
			fmt.Fprintln(stderr, "exec-demo: read frame:", err)
			return 1
		}
		header, payload, _ := bytes.Cut(frame, []byte{'\n'})
		var task struct {
			TaskID  string `json:"task_id"`
			Source  string `json:"source"`
			Attempt int    `json:"attempt"`
		}
		if err := json.Unmarshal(header, &task); err != nil {
			fmt.Fprintln(stderr, "exec-demo: bad task header:", err)
			return 1
		}
		a := handle(payload, task.TaskID, task.Source, task.Attempt)
		if a.diag != "" {
			fmt.Fprintln(stderr, a.diag)
		}
		res := map[string]any{"type": "result", "task_id": task.TaskID, "attempt": task.Attempt, "status": a.status, "annotations": []any{a.annotation},
			"cache": []any{map[string]any{"key": "demo.last_task", "value": task.TaskID, "scope": "cluster"}}}
		if a.status != "ok" {
			res["error"] = a.diag
		}
		if writeFrame(out, res, a.output) != nil {
			return 1
		}
	}
}

// writeFrame writes [4-byte big-endian length][JSON header \n][body].
func writeFrame(w *bufio.Writer, header any, body []byte) error {
	h, err := json.Marshal(header)
	if err != nil {
		return err
	}
	var lb [4]byte
	binary.BigEndian.PutUint32(lb[:], uint32(len(h)+1+len(body)))
	w.Write(lb[:])
	w.Write(h)
	w.WriteByte('\n')
	w.Write(body)
	return w.Flush()
}
