package model

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"svc/worker/event"
)

// capture is an EventRecorder that keeps what it is given.
type capture struct {
	mu     sync.Mutex
	events []event.Event
}

func (c *capture) Event(e event.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.events = append(c.events, e)
}
func (c *capture) Task(event.TaskRow)             {}
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

// rowCapture keeps the task rows it is given.
type rowCapture struct {
	capture
	rows []event.TaskRow
}

func (c *rowCapture) Task(r event.TaskRow) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.rows = append(c.rows, r)
}

// A keyed Kafka task's row names its key's encoding in env, beside the
// masked executor.env keys when there are some; the env shared by rows
// without executor.env never takes another row's keys.
func TestFinishedKeyEncodingEnv(t *testing.T) {
	t.Parallel()
	run := func(ev *Events, key []byte, env map[string]string) map[string]string {
		rec := &rowCapture{}
		ev.Attach(rec)
		task := &Task{ID: "t", Env: env, Msg: &Message{Source: SourceKafka, Alias: "source", Key: key}}
		ev.Finished(SourceKafka, &TaskResult{Task: task, Status: StatusOK})
		if len(rec.rows) != 1 {
			t.Fatalf("%d task rows, want 1", len(rec.rows))
		}
		return rec.rows[0].Env
	}
	plain, withEnv := NewEvents("w1", nil), NewEvents("w1", map[string]string{"DB_PASSWORD": "pw"})
	for _, tc := range []struct {
		ev   *Events
		key  []byte
		env  map[string]string
		want string
	}{
		{plain, []byte("k1"), nil, `{"SVC_KEY_ENCODING":"utf-8"}`},
		{withEnv, []byte("k1"), nil, `{"DB_PASSWORD":"***","SVC_KEY_ENCODING":"utf-8"}`},
		{plain, []byte{0xff, 0}, map[string]string{"REGION": "eu"}, `{"REGION":"eu","SVC_KEY_ENCODING":"base64"}`},
		{plain, []byte{0xff, 0}, nil, `{"SVC_KEY_ENCODING":"base64"}`},
		{plain, []byte("k2"), nil, `{"SVC_KEY_ENCODING":"utf-8"}`},
		{plain, nil, nil, `null`},
	} {
		got, _ := json.Marshal(run(tc.ev, tc.key, tc.env))
		if string(got) != tc.want {
			t.Errorf("env of a task with key %q and env %v = %s, want %s", tc.key, tc.env, got, tc.want)
		}
	}
}

// discard is an EventRecorder that drops everything.
type discard struct{}

func (discard) Event(event.Event)              {}
func (discard) Task(event.TaskRow)             {}
func (discard) State(string, map[string]any)   {}
func (discard) ConfigSnapshot(json.RawMessage) {}

// TestEventsAllocs: the per-task events allocate their encoded payload and
// nothing else (their payload structs went to the heap on the way to
// Event, a copy each, before). Not parallel: AllocsPerRun.
func TestEventsAllocs(t *testing.T) {
	ev := NewEvents("w1", nil)
	ev.Attach(discard{})
	task := &Task{ID: "t1", Input: make([]byte, 1024), Msg: &Message{Source: SourceKafka, Alias: "source", Partition: 3, Offset: 42}}
	ok := &AttemptResult{Status: StatusOK, Output: make([]byte, 1024), Duration: 3 * time.Millisecond}
	res := &TaskResult{Task: task, Status: StatusOK, Output: ok.Output}
	for name, f := range map[string]func(){
		"Received":          func() { ev.Received(task) },
		"executor_started":  func() { ev.Attempt(task, 1, nil) },
		"executor_finished": func() { ev.Attempt(task, 1, ok) },
		"Delivered":         func() { ev.Delivered(res, "out") },
	} {
		if n := testing.AllocsPerRun(200, f); n > 1 {
			t.Errorf("%s: %v allocations, want 1 (the payload)", name, n)
		}
	}
}
