package recorder

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"svc/worker/event"
)

// Over the routine budget a subscriber is not sent a task's routine events
// at once: a failure, retry or timeout then brings them, ahead of itself;
// a first-attempt success leaves them unsent and counted as sampled.
func TestSubscriptionHoldsRoutineEventsUntilOutcome(t *testing.T) {
	r := mustOpen(t, Config{Worker: "w", Cluster: "c"})
	sub := r.Subscribe(10000)
	defer sub.Close()
	lifecycle := func(id string) {
		r.Event(event.Event{Type: event.TypeTaskReceived, TaskID: id, Payload: json.RawMessage(`{}`)})
		r.Event(event.Event{Type: event.TypeExecutorStarted, TaskID: id, Payload: json.RawMessage(`{"attempt":1}`)})
	}
	// The budget is per unix second: a run that straddles a second
	// boundary is run again.
	for run := 0; ; run++ {
		p := fmt.Sprint(run, "-")
		t0, e0 := sub.Sampled()
		for i := 0; ; i++ { // spend this second's budget
			lifecycle(fmt.Sprint(p, "warm-", i))
			r.Task(event.TaskRow{TaskID: fmt.Sprint(p, "warm-", i), Status: "ok", Attempts: 1, Source: "http"})
			if tasks, ev := sub.Sampled(); tasks > t0 && ev > e0 {
				break
			}
		}
		sub.Take(nil, nil)
		sec := time.Now().Unix()
		tasksBefore, eventsBefore := sub.Sampled()

		lifecycle(p + "failed")
		lifecycle(p + "ok")
		lifecycle(p + "retried")
		r.Event(event.Event{Type: event.TypeExecutorFinished, TaskID: p + "failed", Payload: json.RawMessage(`{"attempt":1,"status":"failed","stderr_tail":"boom"}`)})
		r.Task(event.TaskRow{TaskID: p + "ok", Status: "ok", Attempts: 1, Source: "http"})
		r.Event(event.Event{Type: event.TypeExecutorFinished, TaskID: p + "retried", Payload: json.RawMessage(`{"attempt":2,"status":"ok"}`)})
		r.Task(event.TaskRow{TaskID: p + "retried", Status: "ok", Attempts: 2, Source: "http"})
		r.Task(event.TaskRow{TaskID: p + "failed", Status: "failed", Attempts: 1, Source: "http"})
		if time.Now().Unix() != sec && run < 3 {
			continue
		}

		events, tasks, _ := sub.Take(nil, nil)
		var got []string
		for _, e := range events {
			got = append(got, strings.TrimPrefix(e.TaskID, p)+" "+e.Type)
		}
		want := []string{
			"failed task_received", "failed executor_started", "failed executor_finished",
			"retried task_received", "retried executor_started", "retried executor_finished",
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("events sent = %q, want %q", got, want)
		}
		var rows []string
		for _, row := range tasks {
			rows = append(rows, strings.TrimPrefix(row.TaskID, p))
		}
		if fmt.Sprint(rows) != "[retried failed]" {
			t.Errorf("task rows sent = %v, want retried and failed (ok is over the budget)", rows)
		}
		if tasksNow, eventsNow := sub.Sampled(); tasksNow-tasksBefore != 1 || eventsNow-eventsBefore != 2 {
			t.Errorf("sampled grew by %d rows and %d events, want 1 and 2 (the ok task)", tasksNow-tasksBefore, eventsNow-eventsBefore)
		}
		return
	}
}

// Events held for tasks whose outcome never comes age out, counted.
func TestSubscriptionHeldEventsAreBounded(t *testing.T) {
	r := mustOpen(t, Config{Worker: "w", Cluster: "c"})
	sub := r.Subscribe(10000)
	defer sub.Close()
	const n = 5 * heldTasks
	for i := range n {
		r.Event(event.Event{Type: event.TypeTaskReceived, TaskID: fmt.Sprint("lost-", i), Payload: json.RawMessage(`{}`)})
	}
	sub.mu.Lock()
	held := len(sub.held.tasks)
	sub.mu.Unlock()
	if held > heldTasks {
		t.Errorf("%d tasks held, want at most %d", held, heldTasks)
	}
	queued, _, _ := sub.Take(nil, nil)
	if _, sampled := sub.Sampled(); len(queued)+held+int(sampled) != n {
		t.Errorf("%d sent + %d held + %d sampled, want all %d", len(queued), held, sampled, n)
	}
}
