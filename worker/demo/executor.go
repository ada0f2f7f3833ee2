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
	"strconv"
	"strings"
	"time"
)

// Execute is the sample executor (what it does with a message: handle).
// It writes one annotation and one handler-cache row to fd 3 when offered
// (SVC_EVENTS_FD=3); in mode persistent it serves protocol v2 frames.
func Execute(stdin io.Reader, stdout, stderr io.Writer, events *os.File) int {
	if os.Getenv("SVC_EXECUTOR_MODE") == "persistent" {
		return executePersistent(stdin, stdout, stderr)
	}
	in, err := io.ReadAll(stdin)
	if err != nil {
		fmt.Fprintln(stderr, "exec-demo: read stdin:", err)
		return 1
	}
	attempt, _ := strconv.Atoi(os.Getenv("SVC_ATTEMPT"))
	a := handle(in, os.Getenv("SVC_TASK_ID"), os.Getenv("SVC_SOURCE"), attempt)
	if os.Getenv("SVC_EVENTS_FD") == "3" && events != nil {
		defer events.Close()
		line, _ := json.Marshal(map[string]any{"annotation": a.annotation})
		_, _ = events.Write(append(line, '\n'))
		line, _ = json.Marshal(map[string]any{"cache": map[string]any{
			"key": "demo.last_task", "value": os.Getenv("SVC_TASK_ID"), "scope": "cluster",
		}})
		_, _ = events.Write(append(line, '\n'))
	}
	if a.diag != "" {
		fmt.Fprintln(stderr, a.diag)
	}
	switch a.status {
	case "retry":
		return 75
	case "failed":
		return max(a.code, 1)
	}
	_, _ = stdout.Write(a.output)
	return 0
}

// FixCurrency is the currency the demo executor has no rate for until the
// fix: the file whose path FixEnv holds exists.
const (
	FixCurrency = "GBP"
	FixEnv      = "DEMO_FIX_FILE"
)

// fixed says whether the operator applied the demo's fix (checked at
// each task).
func fixed() bool {
	path := os.Getenv(FixEnv)
	if path == "" {
		return false
	}
	_, err := os.Stat(path)
	return err == nil
}

// answer is the demo executor's verdict on one message.
type answer struct {
	status     string // ok, retry or failed
	code       int    // the exit code of a failure in mode spawn (1 when 0)
	output     []byte
	diag       string // a stderr line
	annotation map[string]any
}

// handle decides what the demo does with message in: a retry on the first
// attempt of "tempfail", a failure on "fail" and, until fixed, on an order
// in FixCurrency (exit 3), a second's sleep on "slow", else a JSON summary.
func handle(in []byte, taskID, source string, attempt int) answer {
	text := string(in)
	a := answer{status: "ok", annotation: map[string]any{
		"kind": "demo.summary", "payload": map[string]any{"bytes": len(in), "words": len(strings.Fields(text))},
	}}
	switch {
	case strings.Contains(text, "tempfail") && attempt < 2:
		a.status, a.diag = "retry", "exec-demo: pretending a dependency is down on the first attempt; asking for a retry"
		return a
	case strings.Contains(strings.ReplaceAll(text, "tempfail", ""), "fail"):
		a.status, a.diag = "failed", "exec-demo: the message asked to fail"
		return a
	case strings.Contains(text, `"currency":"`+FixCurrency+`"`) && !fixed():
		a.status, a.code = "failed", 3
		a.diag = "exec-demo: no exchange rate for " + FixCurrency + " (a bug the demo lets you fix: create the file " + os.Getenv(FixEnv) + ", then redrive these orders from the DLQ)"
		return a
	case strings.Contains(text, "slow"):
		time.Sleep(time.Second)
	}
	sum := sha256.Sum256(in)
	out, _ := json.Marshal(map[string]any{
		"task_id": taskID,
		"source":  source,
		"bytes":   len(in),
		"sha256":  hex.EncodeToString(sum[:8]),
		"upper":   string(bytes.ToUpper(in)),
	})
	a.output = append(out, '\n')
	return a
}
