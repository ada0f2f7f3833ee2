package recorder

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"svc/worker/event"
)

// emitTraffic emits, into r, what a worker with two sinks emits for n
// tasks: lifecycle events, 0-2 annotations, the task row announcing its
// deliveries, and the deliveries one task later (as acknowledgements
// arrive). Every tenth task fails (no deliveries, its events stay rows),
// every seventh loses one announced delivery (the row waits out
// deliveryHold), and a state event comes now and then. Two recorders fed
// the same calls from clocks started alike assign the same IDs.
func emitTraffic(r *Recorder, clk *clock, n int) {
	var late []func()
	for i := range n {
		id := fmt.Sprint("t-", i)
		labels := map[string]string{"n": fmt.Sprint(i % 3)}
		status := "ok"
		if i%10 == 5 {
			status = "failed"
		}
		clk.tick()
		r.Event(event.Event{Type: event.TypeTaskReceived, TaskID: id, Labels: labels, Payload: json.RawMessage(`{"source":"http","input_size_bytes":4}`)})
		r.Event(event.Event{Type: event.TypeExecutorStarted, TaskID: id, Labels: labels, Payload: json.RawMessage(`{"attempt":1}`)})
		clk.add(3 * time.Millisecond)
		r.Event(event.Event{Type: event.TypeExecutorFinished, TaskID: id, Labels: labels,
			Payload: json.RawMessage(`{"attempt":1,"status":"` + status + `","exit_code":0,"duration_ms":3,"output_size_bytes":5}`)})
		for a := range i % 3 {
			r.Event(event.Event{Type: event.TypeAnnotation, Kind: fmt.Sprint("echo.k", a), TaskID: id, Labels: labels,
				Payload: json.RawMessage(fmt.Sprintf(`{"i":%d,"a":%d}`, i, a))})
		}
		row := event.TaskRow{TaskID: id, Source: "http", Status: status, Attempts: 1, OutputSizeBytes: 5, Labels: labels, Partition: -1, Offset: -1}
		if status != "ok" {
			row.Error = "exit status 1"
		} else {
			row.Deliveries = 1 + i%2
		}
		r.Task(row)
		for _, f := range late {
			f()
		}
		late = late[:0]
		if status == "ok" {
			for s := range row.Deliveries {
				if i%7 == 0 && s == 0 {
					continue // never acknowledged
				}
				late = append(late, func() {
					clk.tick()
					r.Event(event.Event{Type: event.TypeSinkDelivered, TaskID: id, Labels: labels,
						Payload: json.RawMessage(fmt.Sprintf(`{"output_size_bytes":5,"sink":"s%d"}`, s))})
				})
			}
		}
		if i%25 == 0 {
			r.State("running", map[string]any{"i": i})
		}
	}
	for _, f := range late {
		f()
	}
}

// eventLines renders events as comparable lines, IDs included.
func eventLines(evs []event.Event) []string {
	out := make([]string, 0, len(evs))
	for _, e := range evs {
		labels, _ := json.Marshal(e.Labels)
		out = append(out, fmt.Sprintf("%d %d %s %s %s %s %s %s", e.ID, e.TSms, e.Type, e.Kind, e.TaskID, e.Worker, labels, e.Payload))
	}
	return out
}

// The annotations and deliveries folded into summarized task rows are
// listed by Events exactly as a recorder storing every event as a row
// lists them: same IDs, times, labels and payloads, in the same order,
// whatever the type filter, task, limit or page, from the live file and
// from a sealed one; and the trace of a folded task has them too.
func TestFoldedEventsListLikeRows(t *testing.T) {
	t.Parallel()
	const n = 150
	open := func(full bool) (*Recorder, *clock) {
		clk := newClock()
		cfg := baseConfig(t, t.TempDir(), "", "w1", clk)
		cfg.FullDetail = full
		r := mustOpen(t, cfg)
		startRun(t, r)
		emitTraffic(r, clk, n)
		return r, clk
	}
	folded, _ := open(false)
	rows, _ := open(true)
	waitStats(t, folded, "every task row stored", func(s Stats) bool { return s.TasksWritten == n })
	waitStats(t, rows, "every task row stored", func(s Stats) bool { return s.TasksWritten == n })
	seal(t, folded) // flushes what still waits; then the sealed file is read
	seal(t, rows)
	if s := folded.Stats(); s.EventsSummarized <= 3*(n-n/10) {
		t.Fatalf("%d events folded, not more than the plain successes' lifecycle events: no annotation or delivery was folded", s.EventsSummarized)
	}

	lifecycleOfOK := func(e event.Event) bool {
		if !event.IsLifecycle(&e) {
			return false
		}
		var i int
		fmt.Sscanf(e.TaskID, "t-%d", &i)
		return i%10 != 5
	}
	list := func(r *Recorder, q EventQuery) []event.Event {
		t.Helper()
		evs, err := r.Events(t.Context(), q)
		if err != nil {
			t.Fatalf("Events(%+v) error = %v", q, err)
		}
		return evs
	}
	// page lists every event q selects, limit at a time, following before_id.
	page := func(r *Recorder, q EventQuery, dropLifecycle bool) []string {
		var all []event.Event
		for {
			evs := list(r, q)
			all = append(all, evs...)
			if len(evs) < q.Limit {
				break
			}
			q.BeforeID = evs[len(evs)-1].ID
		}
		if dropLifecycle {
			all = slices.DeleteFunc(all, lifecycleOfOK)
		}
		return eventLines(all)
	}
	for _, q := range []EventQuery{
		{Types: []string{event.TypeAnnotation}, Limit: 1000},
		{Types: []string{event.TypeAnnotation}, Limit: 7},
		{Types: []string{event.TypeSinkDelivered}, Limit: 13},
		{Types: []string{event.TypeAnnotation, event.TypeSinkDelivered, event.TypeState}, Limit: 11},
		{Types: []string{event.TypeState}, Limit: 3},
		{TaskID: "t-4", Limit: 2},
		{TaskID: "t-15", Limit: 1000},
		{Limit: 1000},
		{Limit: 17},
	} {
		// The folded recorder does not list the lifecycle events of its
		// summarized tasks (as before): the oracle leaves them out after
		// paging, so compare unlimited queries for those.
		lifecycleToo := len(q.Types) == 0
		if lifecycleToo && q.Limit < 1000 {
			want := page(rows, EventQuery{TaskID: q.TaskID, Limit: 1000}, true)
			got := page(folded, q, false)
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("Events(%+v), paged:\n%s\nwant\n%s", q, strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			continue
		}
		want := page(rows, q, lifecycleToo)
		got := page(folded, q, false)
		if len(want) == 0 {
			t.Fatalf("Events(%+v) lists nothing: the test proves nothing", q)
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("Events(%+v), paged:\n%s\nwant\n%s", q, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
	// A folded task's trace holds its annotations and deliveries.
	for _, id := range []string{"t-4", "t-7", "t-14"} {
		want, got := traceLines(t, rows, id), traceLines(t, folded, id)
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("trace %s:\n%s\nwant\n%s", id, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
}

// BenchmarkEventsFolded lists events from a live file of 30,000 folded
// tasks (annotations and deliveries in their rows) as the UI does: the
// newest 1,000 annotations, the newest 200 events, and a page of 200 in
// the middle. It guards the merge of folded events with event rows.
func BenchmarkEventsFolded(b *testing.B) {
	clk := newClock()
	cfg := baseConfig(b, b.TempDir(), "", "w1", clk)
	cfg.BufferSize = 1 << 16
	r := mustOpen(b, cfg)
	startRun(b, r)
	const n = 30_000
	for i := range n {
		for r.queued.Load() > int64(r.cfg.BufferSize-16) {
			time.Sleep(time.Millisecond)
		}
		id := fmt.Sprint("t-", i)
		clk.tick()
		r.Event(event.Event{Type: event.TypeTaskReceived, TaskID: id, Payload: json.RawMessage(`{"source":"http","input_size_bytes":4}`)})
		r.Event(event.Event{Type: event.TypeExecutorStarted, TaskID: id, Payload: json.RawMessage(`{"attempt":1}`)})
		r.Event(event.Event{Type: event.TypeExecutorFinished, TaskID: id, Payload: json.RawMessage(`{"attempt":1,"status":"ok","exit_code":0,"duration_ms":3,"output_size_bytes":5}`)})
		r.Event(event.Event{Type: event.TypeAnnotation, Kind: "echo.size", TaskID: id, Payload: json.RawMessage(`{"bytes":5}`)})
		r.Task(event.TaskRow{TaskID: id, Source: "http", Status: "ok", Attempts: 1, OutputSizeBytes: 5, Partition: -1, Offset: -1, Deliveries: 1})
		r.Event(event.Event{Type: event.TypeSinkDelivered, TaskID: id, Payload: json.RawMessage(`{"output_size_bytes":5,"sink":"out"}`)})
	}
	waitStats(b, r, "every task stored", func(s Stats) bool { return s.TasksWritten == n })
	mid, err := r.Events(b.Context(), EventQuery{Limit: 1000})
	if err != nil || len(mid) != 1000 {
		b.Fatalf("Events() = %d, %v", len(mid), err)
	}
	for _, q := range []struct {
		name string
		q    EventQuery
	}{
		{"annotations_1000", EventQuery{Types: []string{event.TypeAnnotation}, Limit: 1000}},
		{"newest_200", EventQuery{Limit: 200}},
		{"page_200_deep", EventQuery{Limit: 200, BeforeID: mid[len(mid)-1].ID - 20_000}},
	} {
		b.Run(q.name, func(b *testing.B) {
			for b.Loop() {
				evs, err := r.Events(b.Context(), q.q)
				if err != nil || len(evs) != q.q.Limit {
					b.Fatalf("Events(%+v) = %d, %v", q.q, len(evs), err)
				}
			}
		})
	}
}
