package worker

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"svc/worker/config"
	"svc/worker/model"
	"svc/worker/workertest/wait"
)

// TestRunningTasksListsWhatRunsNow runs a Kafka task and an HTTP request
// through an App whose runner holds them: both are listed, longest-running
// first, with their coordinates, key and attempt; once released, none is.
func TestRunningTasksListsWhatRunsNow(t *testing.T) {
	cfg := config.Default()
	cfg.Executor.BinaryPath = "/bin/cat"
	cfg.Sources.HTTP.Enabled, cfg.Sources.HTTP.Host = true, "127.0.0.1"
	cfg.Resolve()
	release := make(chan struct{})
	var ev *model.Events
	runner := runnerFunc(func(_ context.Context, tk *model.Task) model.TaskResult {
		ev.Attempt(tk, 1, nil)                  // what the pool's OnAttempt hook does
		if tk.Msg.Source == model.SourceKafka { // attempt 1 failed, 2 runs and ends; a third would wait
			ev.Attempt(tk, 1, &model.AttemptResult{Status: model.StatusFailed})
			ev.Attempt(tk, 2, nil)
			ev.Attempt(tk, 2, &model.AttemptResult{Status: model.StatusFailed})
		}
		<-release
		return model.TaskResult{Task: tk, Status: model.StatusOK, Attempts: 1}
	})
	app, err := New(&cfg, Deps{Runner: runner})
	if err != nil {
		t.Fatal(err)
	}
	long := bytes.Repeat([]byte("k"), MaxRunningKey+10)
	done := make(chan struct{}, 2)
	go func() {
		app.RunTasks(t.Context(), model.SourceKafka, []model.Task{{ID: "t-kafka", Msg: &model.Message{Source: model.SourceKafka, Alias: "source", Topic: "raw", Partition: 3, Offset: 41, Key: long}}})
		done <- struct{}{}
	}()
	wait.For(t, 5*time.Second, "the Kafka task running", func() (bool, string) { n := app.Running().Len(); return n == 1, fmt.Sprint(n, " running") })
	time.Sleep(2 * time.Millisecond) // started times differ: the Kafka task is the older
	go func() {
		_, _ = app.HandleHTTP(context.Background(), &model.HTTPRequest{ID: "req-7", Key: []byte("user-1"), Body: []byte("{}")})
		done <- struct{}{}
	}()
	wait.For(t, 5*time.Second, "both tasks running", func() (bool, string) { n := app.Running().Len(); return n == 2, fmt.Sprint(n, " running") })

	got, total := app.Running().Snapshot(10)
	if total != 2 || len(got) != 2 {
		t.Fatalf("Snapshot = %d tasks, total %d; want 2, 2", len(got), total)
	}
	k, h := got[0], got[1]
	if k.TaskID != "t-kafka" || k.Source != model.SourceKafka || k.Alias != "source" || k.Partition != 3 || k.Offset != 41 || k.Attempt != 2 || !k.AttemptEnded {
		t.Errorf("first (oldest) = %+v, want the Kafka task source 3:41 with attempt 2 ended", k)
	}
	if len(k.Key) != MaxRunningKey || !k.KeyTruncated {
		t.Errorf("Kafka key: %d bytes, truncated %v; want %d, true", len(k.Key), k.KeyTruncated, MaxRunningKey)
	}
	if h.Source != model.SourceHTTP || h.RequestID != "req-7" || string(h.Key) != "user-1" || h.Alias != "" || h.Attempt != 1 || h.AttemptEnded || h.TaskID == "" {
		t.Errorf("second = %+v, want the HTTP task of req-7, key user-1, attempt 1 running", h)
	}
	if f, ok := app.Running().Find(h.TaskID); !ok || f.RequestID != "req-7" {
		t.Errorf("Find(%s) = %+v %v, want the HTTP task", h.TaskID, f, ok)
	}
	if _, ok := app.Running().Find("nope"); ok {
		t.Error("Find(nope) found a task")
	}
	if a := app.Running().Attempts(); len(a) != 2 || a["t-kafka"] != (AttemptNow{2, true}) || a[h.TaskID] != (AttemptNow{1, false}) {
		t.Errorf("Attempts() = %+v, want t-kafka 2 ended, %s 1 running", a, h.TaskID)
	}
	if !k.Started.Before(h.Started) {
		t.Errorf("started: kafka %v, http %v; want the Kafka task older", k.Started, h.Started)
	}
	if one, total := app.Running().Snapshot(1); len(one) != 1 || total != 2 || one[0].TaskID != "t-kafka" {
		t.Errorf("Snapshot(1) = %+v total %d, want the Kafka task alone, total 2", one, total)
	}
	close(release)
	<-done
	<-done
	if got, total := app.Running().Snapshot(10); total != 0 || len(got) != 0 {
		t.Errorf("after release: %+v total %d, want none", got, total)
	}
}

// BenchmarkRunningAddRemove is the registry's cost per task on the hot
// path: one add and one remove, with 8 other tasks running.
func BenchmarkRunningAddRemove(b *testing.B) {
	r := newRunningTasks()
	others := make([]model.Task, 8)
	for i := range others {
		r.add(&others[i], model.SourceKafka, time.Now())
	}
	tk := &model.Task{ID: "t"}
	b.ReportAllocs()
	for b.Loop() {
		r.add(tk, model.SourceKafka, time.Now())
		r.remove(tk)
	}
}

// BenchmarkRunningAddRemoveParallel is the same with every core adding and
// removing its own tasks at once (the lock contended).
func BenchmarkRunningAddRemoveParallel(b *testing.B) {
	r := newRunningTasks()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		tk := &model.Task{ID: "t"}
		for pb.Next() {
			r.add(tk, model.SourceKafka, time.Now())
			r.remove(tk)
		}
	})
}
