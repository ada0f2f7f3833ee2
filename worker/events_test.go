package worker

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"svc/recorder"
)

// capture is an EventRecorder that keeps what it is given.
type capture struct {
	mu     sync.Mutex
	events []recorder.Event
}

func (c *capture) Event(e recorder.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.events = append(c.events, e)
}
func (c *capture) Task(recorder.TaskRow)          {}
func (c *capture) State(string, map[string]any)   {}
func (c *capture) ConfigSnapshot(json.RawMessage) {}

// executor_finished keeps the end of stdout and stderr for the task panel.
func TestAttemptEventKeepsOutputTails(t *testing.T) {
	t.Parallel()
	rec := &capture{}
	ev := NewEvents("w1", nil)
	ev.Attach(rec)
	out := strings.Repeat("a", 3000) + "THE END"
	ev.Attempt(&Task{ID: "t1"}, 1, &AttemptResult{Status: StatusFailed, Output: []byte(out), Stderr: []byte("boom\n"), ExitCode: 1})
	if len(rec.events) != 1 {
		t.Fatalf("recorded %d events, want 1", len(rec.events))
	}
	var p struct {
		StdoutTail string `json:"stdout_tail"`
		StderrTail string `json:"stderr_tail"`
	}
	if err := json.Unmarshal(rec.events[0].Payload, &p); err != nil {
		t.Fatal(err)
	}
	if len(p.StdoutTail) != eventTail || !strings.HasSuffix(p.StdoutTail, "THE END") {
		t.Errorf("stdout_tail = %d bytes ending %q, want the last %d bytes", len(p.StdoutTail), p.StdoutTail[max(0, len(p.StdoutTail)-10):], eventTail)
	}
	if p.StderrTail != "boom\n" {
		t.Errorf("stderr_tail = %q, want the whole short stderr", p.StderrTail)
	}
}

// A successful first attempt without stderr carries no stdout tail (the
// recorder would not store it: history.task_detail = "summary"), unless
// KeepOKTail; a retry that succeeds keeps it.
func TestOKAttemptTail(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		keep    bool
		attempt int
		want    bool
	}{{false, 1, false}, {true, 1, true}, {false, 2, true}} {
		rec := &capture{}
		ev := NewEvents("w1", nil)
		ev.KeepOKTail = c.keep
		ev.Attach(rec)
		ev.Attempt(&Task{ID: "t1"}, c.attempt, &AttemptResult{Status: StatusOK, Output: []byte("hello")})
		if got := strings.Contains(string(rec.events[0].Payload), `"stdout_tail":"hello"`); got != c.want {
			t.Errorf("keep %v, attempt %d: payload %s, want a stdout tail %v", c.keep, c.attempt, rec.events[0].Payload, c.want)
		}
	}
}
