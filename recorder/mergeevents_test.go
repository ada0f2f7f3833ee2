package recorder

import (
	"encoding/json"
	"fmt"
	"testing"

	"svc/worker/event"
)

// An event found both in a sealed file and in a peer's answer (its live
// file, asked just before it sealed) appears once however its payload was
// spaced on the way; the trace comes oldest first.
func TestMergeEventsOnceInTimeOrder(t *testing.T) {
	t.Parallel()
	sealed := []event.Event{
		{ID: 7, TSms: 200, Type: event.TypeExecutorFinished, TaskID: "t", Worker: "b", Payload: json.RawMessage(`{"status":"ok","exit_code":0}`)},
		{ID: 5, TSms: 100, Type: event.TypeTaskReceived, TaskID: "t", Worker: "b", Payload: json.RawMessage(`{"source":"http"}`)},
	}
	peer := []event.Event{
		{ID: 7, TSms: 200, Type: event.TypeExecutorFinished, TaskID: "t", Worker: "b", Payload: json.RawMessage(`{"status": "ok", "exit_code": 0}`)},
		{ID: 6, TSms: 150, Type: event.TypeExecutorStarted, TaskID: "t", Worker: "b", Payload: json.RawMessage(`{"attempt":1}`)},
	}
	own := []event.Event{{ID: 1, TSms: 150, Type: event.TypeAnnotation, Kind: "k", TaskID: "t", Worker: "a", Payload: json.RawMessage(`{}`)}}
	got := MergeEvents(sealed, peer, own)
	var ids []string
	for _, e := range got {
		ids = append(ids, fmt.Sprintf("%s:%d", e.Worker, e.ID))
	}
	if want := "[b:5 a:1 b:6 b:7]"; fmt.Sprint(ids) != want {
		t.Errorf("merged = %v, want %s", ids, want)
	}
	rows := MergeTaskRows("customer", nil, 10,
		[]event.TaskRow{{TaskID: "t", TSms: 1, Worker: "b", Status: "ok", Attempts: 1, Labels: map[string]string{"customer": "x"}}},
		[]event.TaskRow{{TaskID: "t", TSms: 1, Worker: "b", Status: "ok", Attempts: 1, Labels: map[string]string{"customer": "x"}},
			{TaskID: "u", TSms: 2, Worker: "b", Status: "ok", Attempts: 1, Labels: map[string]string{"other": "y"}}})
	if len(rows) != 1 || rows[0].TaskID != "t" {
		t.Errorf("merged rows = %+v, want t once (u lacks the label)", rows)
	}
}
