package recorder

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"svc/worker/event"
)

// TestFullQueueOverflowsInsteadOfDropping: while the writer cannot write
// (here: not running yet; in production a seal of a large live file or a
// slow disk), events past a full write queue wait in the overflow list and
// are all stored once the writer runs, readable in ID order; only past the
// list's byte bound are they dropped and counted.
func TestFullQueueOverflowsInsteadOfDropping(t *testing.T) {
	t.Parallel()
	clk := newClock()
	cfg := baseConfig(t, t.TempDir(), "", "w1", clk)
	cfg.BufferSize = 16
	r := mustOpen(t, cfg)

	const n = 2000
	for i := range n {
		r.Event(event.Event{Type: event.TypeState, Kind: "step", Payload: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))})
	}
	if s := r.Stats(); s.EventsDropped != 0 || s.Overflowed != n-16 || s.Queued != n {
		t.Fatalf("with the writer stopped: dropped %d, overflowed %d, queued %d; want 0, %d, %d", s.EventsDropped, s.Overflowed, s.Queued, n-16, n)
	}
	startRun(t, r)
	waitWritten(t, r, n, 0)

	var got []event.Event
	before := int64(0)
	for {
		evs, err := r.Events(context.Background(), EventQuery{Types: []string{event.TypeState}, Limit: 1000, BeforeID: before})
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) == 0 {
			break
		}
		got = append(got, evs...)
		before = evs[len(evs)-1].ID
	}
	if len(got) != n {
		t.Fatalf("%d events stored, want %d", len(got), n)
	}
	// Newest first: the payloads count down from n-1 to 0.
	for i, e := range got {
		if want := fmt.Sprintf(`{"i":%d}`, n-1-i); string(e.Payload) != want {
			t.Fatalf("event %d (id %d) = %s, want %s: events out of their order", i, e.ID, e.Payload, want)
		}
	}
	if s := r.Stats(); s.EventsDropped != 0 || s.Queued != 0 {
		t.Errorf("after the writer ran: dropped %d, queued %d; want 0, 0", s.EventsDropped, s.Queued)
	}
}

// TestOverflowIsBounded: the overflow list holds at most overflowMaxBytes;
// past it events are dropped and counted, and what it took is stored.
func TestOverflowIsBounded(t *testing.T) {
	t.Parallel()
	clk := newClock()
	cfg := baseConfig(t, t.TempDir(), "", "w1", clk)
	cfg.BufferSize = 1
	r := mustOpen(t, cfg)
	big := json.RawMessage(`"` + strings.Repeat("x", 1<<20) + `"`)
	const n = 40 // 40 MiB of payloads, over the 32 MiB bound
	for range n {
		r.Event(event.Event{Type: event.TypeState, Kind: "big", Payload: big})
	}
	s := r.Stats()
	kept := 1 + s.Overflowed
	if s.EventsDropped == 0 || kept+s.EventsDropped != n || s.Overflowed > overflowMaxBytes>>20 {
		t.Fatalf("dropped %d, overflowed %d of %d 1 MiB events; want some dropped and at most %d overflowed", s.EventsDropped, s.Overflowed, n, overflowMaxBytes>>20)
	}
	startRun(t, r)
	waitWritten(t, r, kept, 0)
}
