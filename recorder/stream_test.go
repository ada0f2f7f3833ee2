package recorder

import (
	"context"
	"errors"
	"strings"
	"testing"

	"svc/worker/event"
)

// cancelWriter cancels its context on the first write and counts bytes.
type cancelWriter struct {
	cancel context.CancelFunc
	n      int
}

func (w *cancelWriter) Write(p []byte) (int, error) {
	w.cancel()
	w.n += len(p)
	return len(p), nil
}

// TestSnapshotStopsWithContext: a snapshot whose client went away (its
// context ended) stops streaming instead of copying the whole file.
func TestSnapshotStopsWithContext(t *testing.T) {
	t.Parallel()
	cfg := baseConfig(t, t.TempDir(), "", "w", newClock())
	cfg.FullDetail = true // events written at once, not after the summary hold
	r := mustOpen(t, cfg)
	startRun(t, r)
	for range 2000 {
		r.Event(event.Event{Type: event.TypeTaskReceived, TaskID: "t", Labels: map[string]string{"pad": strings.Repeat("x", 200)}})
	}
	waitWritten(t, r, 2000, 0)
	var full countWriter
	if err := r.SnapshotLive(t.Context(), &full); err != nil || full < 256<<10 {
		t.Fatalf("SnapshotLive() = %d bytes, %v; want a file of some size", full, err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	w := &cancelWriter{cancel: cancel}
	err := r.SnapshotLive(ctx, w)
	if !errors.Is(err, context.Canceled) || w.n >= int(full) {
		t.Errorf("SnapshotLive() after the client left = %v with %d of %d bytes written; want context.Canceled early", err, w.n, full)
	}
}

// TestTraceStopsWithContext: a trace for a client that went away ends with
// the context's error.
func TestTraceStopsWithContext(t *testing.T) {
	t.Parallel()
	r, _ := pathFixture(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := r.Trace(ctx, "t"); !errors.Is(err, context.Canceled) {
		t.Errorf("Trace() with an ended context = %v, want context.Canceled", err)
	}
}

type countWriter int

func (c *countWriter) Write(p []byte) (int, error) { *c += countWriter(len(p)); return len(p), nil }
