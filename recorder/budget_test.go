package recorder

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// TestLiveFileSealedAtItsSize: a busy worker's live file is sealed as soon
// as it outgrows LiveMaxBytes, long before the seal interval, so it stays
// bounded; every event stays traceable in the sealed files.
func TestLiveFileSealedAtItsSize(t *testing.T) {
	t.Parallel()
	clk := newClock()
	dir, shared := t.TempDir(), t.TempDir()
	cfg := baseConfig(t, dir, shared, "w", clk) // seal interval: an hour
	cfg.LiveMaxBytes = 256 << 10
	r := mustOpen(t, cfg)
	startRun(t, r)
	payload := json.RawMessage(`{"stdout_tail":"` + strings.Repeat("x", 1000) + `"}`)
	var written uint64
	for burst := range 2 {
		for range 600 { // about 700 KiB with the indexes
			clk.tick()
			r.Event(Event{Type: TypeExecutorFinished, TaskID: "t" + itoa(burst), Payload: payload})
			written++
		}
		waitWritten(t, r, written, 0)
		waitStats(t, r, "a seal of the oversized live file", func(s Stats) bool { return s.Seals == uint64(burst+1) })
		dbs, err := r.Databases(t.Context())
		if err != nil || dbs[0].Kind != "live" || dbs[0].SizeBytes > cfg.LiveMaxBytes {
			t.Fatalf("after burst %d: Databases()[0] = %+v, %v; want a live file below %d bytes", burst, dbs[0], err, cfg.LiveMaxBytes)
		}
	}
	sealed, _ := filepath.Glob(filepath.Join(shared, "history", "c1", "w-*.db"))
	if len(sealed) != 2 {
		t.Errorf("sealed files = %v, want one per burst", sealed)
	}
	for burst := range 2 {
		if evs, err := r.Trace(t.Context(), "t"+itoa(burst)); err != nil || len(evs) != 600 {
			t.Errorf("Trace(t%d) = %d events, %v; want all 600", burst, len(evs), err)
		}
	}
}
