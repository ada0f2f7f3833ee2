package model

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"svc/recorder"
)

// BenchmarkKafkaTaskEvents emits what the worker records for one successful
// Kafka task (task_received, executor_started, executor_finished, one
// annotation, the task row, sink_delivered) into a real recorder writing
// its live file, and reports the process's CPU per task (cpu-ns/task: it
// holds on a loaded machine where ns/op does not). It guards the event
// encoding and the recorder's write path of the Kafka hot path.
func BenchmarkKafkaTaskEvents(b *testing.B) {
	rec, err := recorder.Open(context.Background(), recorder.Config{Dir: b.TempDir(), Worker: "w1", Cluster: "c1",
		BufferSize: 4096}) // SampleAbove 0: every task row is stored
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); rec.Run(ctx) }()
	defer func() { cancel(); <-done; rec.Close() }()
	ev := NewEvents("w1", nil)
	ev.Attach(rec)
	input := make([]byte, 1024)
	output := make([]byte, 1024)
	ann := []Annotation{{Kind: "echo.size", Payload: []byte(`{"attempt":1,"bytes":1024}`)}}
	var n int64
	cpu0 := benchCPU()
	for b.Loop() {
		for rec.Stats().Queued > 3000 {
			time.Sleep(100 * time.Microsecond) // not a spin: the CPU figure is the writer's
		}
		msg := &Message{Source: SourceKafka, Alias: "source", Topic: "in", Partition: int32(n % 6), Offset: n, Key: []byte(fmt.Sprintf("key-%d", n%1000))}
		t := &Task{ID: fmt.Sprintf("task-%d", n), Input: input, Msg: msg}
		ev.Received(t)
		ev.Attempt(t, 1, nil)
		ev.Attempt(t, 1, &AttemptResult{Status: StatusOK, Output: output, Duration: 3 * time.Millisecond})
		res := &TaskResult{Task: t, Status: StatusOK, Output: output, Attempts: 1, Duration: 3 * time.Millisecond, Annotations: ann}
		ev.Finished(SourceKafka, res)
		ev.Delivered(res, "out")
		n++
	}
	for rec.Stats().Queued > 0 || rec.Stats().TasksWritten < uint64(n) {
		time.Sleep(time.Millisecond)
	}
	b.StopTimer()
	b.ReportMetric(float64((benchCPU()-cpu0).Nanoseconds())/float64(n), "cpu-ns/task")
	if s := rec.Stats(); s.EventsDropped+s.TasksDropped != 0 {
		b.Fatalf("dropped: %+v", s)
	}
}

// benchCPU is this process's user+system CPU time so far.
func benchCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
