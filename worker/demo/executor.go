// Package demo holds the pieces of `svc demo`: the sample executor (the svc
// binary itself, run as `svc exec-demo`) and the demo configuration.
package demo

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// Execute is the sample executor. It reads the message from stdin and:
// asks for a retry (exit 75, so it is retried and finally fails) when the
// message contains "tempfail", fails (exit 1) when it contains "fail",
// sleeps a second when it contains "slow", and otherwise answers a JSON
// summary of the message. It writes one annotation and its labels to fd 3
// when the worker offers the side channel (SVC_EVENTS_FD=3).
// It also writes one handler-cache row there: demo.last_task.
func Execute(stdin io.Reader, stdout, stderr io.Writer, events *os.File) int {
	in, err := io.ReadAll(stdin)
	if err != nil {
		fmt.Fprintln(stderr, "exec-demo: read stdin:", err)
		return 1
	}
	text := string(in)
	if os.Getenv("SVC_EVENTS_FD") == "3" && events != nil {
		defer events.Close()
		line, _ := json.Marshal(map[string]any{"annotation": map[string]any{
			"kind": "demo.summary", "payload": map[string]any{"bytes": len(in), "words": len(strings.Fields(text))},
		}})
		_, _ = events.Write(append(line, '\n'))
		// One handler-cache row: the newest task, shared with the cluster.
		line, _ = json.Marshal(map[string]any{"cache": map[string]any{
			"key": "demo.last_task", "value": os.Getenv("SVC_TASK_ID"), "scope": "cluster",
		}})
		_, _ = events.Write(append(line, '\n'))
	}
	switch {
	case strings.Contains(text, "tempfail"):
		fmt.Fprintln(stderr, "exec-demo: pretending a dependency is down; asking for a retry (exit 75)")
		return 75
	case strings.Contains(text, "fail"):
		fmt.Fprintln(stderr, "exec-demo: the message asked to fail")
		return 1
	case strings.Contains(text, "slow"):
		time.Sleep(time.Second)
	}
	sum := sha256.Sum256(in)
	out, _ := json.Marshal(map[string]any{
		"task_id": os.Getenv("SVC_TASK_ID"),
		"source":  os.Getenv("SVC_SOURCE"),
		"bytes":   len(in),
		"sha256":  hex.EncodeToString(sum[:8]),
		"upper":   string(bytes.ToUpper(in)),
	})
	_, _ = stdout.Write(append(out, '\n'))
	return 0
}
