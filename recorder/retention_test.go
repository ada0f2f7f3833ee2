package recorder

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"svc/worker/event"
)

// TestArchivingOffDeletesNothing: with archiving off, sealed files however
// old and merge results past their retention stay, both under Run's own
// loops and when an archive pass is invoked directly.
func TestArchivingOffDeletesNothing(t *testing.T) {
	t.Parallel()
	dir, shared := t.TempDir(), t.TempDir()
	c1 := filepath.Join(shared, "history", "c1")
	merged := filepath.Join(shared, "merged")
	old := time.Now().Add(-90 * 24 * time.Hour).UnixMilli()
	writeDB(t, filepath.Join(c1, "w-"+itoa(int(old))+"-"+itoa(int(old+1000))+".db"), "t")
	writeDB(t, filepath.Join(merged, "merged-"+itoa(int(old))+"-0123456789abcdef.db"), "t")
	for _, p := range []string{filepath.Join(c1, "w-"+itoa(int(old))+"-"+itoa(int(old+1000))+".db.meta.json"),
		filepath.Join(merged, "merged-"+itoa(int(old))+"-0123456789abcdef.db.meta.json")} {
		os.WriteFile(p, []byte(`{}`), 0o600)
	}
	r := mustOpen(t, Config{Dir: dir, SharedDir: shared, Worker: "w", Cluster: "c1", Logger: testLogger(t),
		ArchiveEnabled: false, ArchiveAfter: time.Millisecond, ArchiveWindow: 10 * time.Millisecond,
		MergedRetentionDays: 1, SealInterval: 20 * time.Millisecond, WatchdogInterval: time.Hour})
	stop := startRun(t, r)
	// Let the loops turn several times: three live files sealed.
	waitStats(t, r, "three seals", func(s Stats) bool {
		r.Event(event.Event{Type: event.TypeTaskReceived, TaskID: "t"})
		return s.Seals >= 3
	})
	if err := r.archivePass(t.Context()); err != nil {
		t.Errorf("archivePass() with archiving off = %v", err)
	}
	if err := stop(); err != nil {
		t.Fatalf("Run() = %v", err)
	}
	sealed, _ := filepath.Glob(filepath.Join(c1, "w-*.db"))
	if len(sealed) < 4 || !slices.Contains(sealed, filepath.Join(c1, "w-"+itoa(int(old))+"-"+itoa(int(old+1000))+".db")) {
		t.Errorf("sealed files = %v, want the old one and every new one kept", sealed)
	}
	if archives, _ := filepath.Glob(filepath.Join(c1, "*.db.gz")); len(archives) != 0 {
		t.Errorf("archives = %v with archiving off, want none", archives)
	}
	if got := dirNames(t, merged); len(got) != 2 {
		t.Errorf("merged/ holds %v, want the expired merge result and its meta kept", got)
	}
	if s := r.Stats(); s.ArchivedFiles != 0 || s.MergedRemoved != 0 {
		t.Errorf("Stats() = %+v, want nothing archived or removed", s)
	}
}

// TestHugeRetentionKeepsMergeResults: a retention far beyond what a
// time.Duration holds means "keep", not an overflow that expires everything.
func TestHugeRetentionKeepsMergeResults(t *testing.T) {
	t.Parallel()
	clk := newClock()
	shared := t.TempDir()
	merged := filepath.Join(shared, "merged")
	for _, age := range []time.Duration{0, 400 * 24 * time.Hour} {
		writeDB(t, filepath.Join(merged, "merged-"+itoa(int(clk.now().Add(-age).UnixMilli()))+"-0123456789abcdef.db"), "t")
	}
	for _, days := range []int{106752, 1 << 40} {
		cfg := baseConfig(t, "", shared, "w", clk)
		cfg.ArchiveEnabled, cfg.MergedRetentionDays = true, days
		r := mustOpen(t, cfg)
		if err := r.archivePass(t.Context()); err != nil {
			t.Fatal(err)
		}
		if got := dirNames(t, merged); len(got) != 2 {
			t.Errorf("merged_retention_days %d left %v, want both merge results", days, got)
		}
	}
}
