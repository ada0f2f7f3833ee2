package recorder

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"svc/worker/event"
)

func TestMergeContent(t *testing.T) {
	clk := newClock()
	shared := t.TempDir()
	a := mustOpen(t, baseConfig(t, t.TempDir(), shared, "w-a", clk))
	b := mustOpen(t, baseConfig(t, t.TempDir(), shared, "w-b", clk))
	startRun(t, a)
	startRun(t, b)
	for i, r := range []*Recorder{a, b} {
		r.ConfigSnapshot(json.RawMessage(`{"n":1}`))
		r.State("running", nil)
		for range 5 + i {
			r.Event(event.Event{Type: event.TypeExecutorStarted, TaskID: "t"})
		}
		r.Task(event.TaskRow{TaskID: "t", Status: "ok", Labels: map[string]string{"k": "v", "x": "y"}})
		waitWritten(t, r, uint64(7+i), 1)
		clk.add(time.Second)
		seal(t, r)
	}
	var rels []string
	dbs, _ := a.Databases(t.Context())
	for _, d := range dbs {
		if d.Kind == "sealed" {
			rels = append(rels, d.Path)
		}
	}
	if len(rels) != 2 {
		t.Fatalf("sealed files = %v, want 2", rels)
	}
	res, err := a.Merge(t.Context(), rels)
	if err != nil {
		t.Fatalf("Merge(%v) error = %v", rels, err)
	}
	if res.Events != 15 || res.SizeBytes == 0 {
		t.Errorf("Merge() = %+v, want 15 events", res)
	}
	abs, err := b.ResolveDownload(res.Path)
	if err != nil {
		t.Fatalf("ResolveDownload(%s) = %v", res.Path, err)
	}
	db, err := openReadOnly(t.Context(), abs)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var events, tasks, labels, configs, states, sources int
	scan(db, `SELECT (SELECT count(*) FROM events), (SELECT count(*) FROM tasks), (SELECT count(*) FROM task_labels),
		(SELECT count(*) FROM config_snapshots), (SELECT count(*) FROM state_timeline), (SELECT count(*) FROM sources)`,
		[]any{&events, &tasks, &labels, &configs, &states, &sources})
	if events != 15 || tasks != 2 || labels != 4 || configs != 2 || states != 2 || sources != 2 {
		t.Errorf("merged file rows = %d events %d tasks %d labels %d configs %d states %d sources; want 15 2 4 2 2 2",
			events, tasks, labels, configs, states, sources)
	}
	workers, _ := texts(db, `SELECT DISTINCT worker FROM events ORDER BY worker`)
	if !slices.Equal(workers, []string{"w-a", "w-b"}) {
		t.Errorf("merged workers = %v, want w-a and w-b", workers)
	}
	var meta fileMeta
	data, _ := os.ReadFile(abs + ".meta.json")
	if err := json.Unmarshal(data, &meta); err != nil || meta.Kind != "merged" || meta.Events != 15 ||
		!slices.Equal(meta.Sources, rels) || meta.FromMs == 0 || meta.ToMs < meta.FromMs {
		t.Errorf("merged meta = %s (%v), want kind merged, 15 events, sources %v", data, err, rels)
	}
	// A merge result can itself be merged.
	res2, err := b.Merge(t.Context(), []string{res.Path, rels[0]})
	if err != nil || (res2.Events != 15+7 && res2.Events != 15+8) { // plus one worker's 7 or 8
		t.Errorf("Merge(merged, sealed) = %+v, %v", res2, err)
	}
	if k := kinds(t, b); k["merged"] != 2 {
		t.Errorf("Databases() kinds = %v, want 2 merged", k)
	}
	if left, _ := filepath.Glob(filepath.Join(shared, "merged", ".*")); len(left) != 0 {
		t.Errorf("temp files left in merged/: %v", left)
	}
}
