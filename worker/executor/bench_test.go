package executor

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"svc/worker/model"
)

// benchParallelism is how many tasks are in flight at once, in both
// benchmarks (and the pool size of the spawn one).
const benchParallelism = 8

// BenchmarkSpawnCat measures Pool.Run with cat and 1 KiB of input, to be
// read against BenchmarkBareExecCat from the same run.
func BenchmarkSpawnCat(b *testing.B) {
	cat, input := benchSetup(b)
	p, err := NewPool(Options{BinaryPath: cat, PoolSize: benchParallelism, Timeout: time.Minute, MaxAttempts: 1})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	benchRun(b, func(i int64) error {
		task := &model.Task{ID: fmt.Sprint("bench-", i), Input: input, Labels: map[string]string{"tenant": "bench"},
			Msg: &model.Message{Source: model.SourceKafka, Alias: "bench", Partition: 1, Offset: i, Key: []byte("key")}}
		res := p.Run(ctx, task)
		if res.Status != model.StatusOK || len(res.Output) != len(input) {
			return fmt.Errorf("Run = %s, %d bytes, %v", res.Status, len(res.Output), res.Err)
		}
		return nil
	})
}

// BenchmarkBareExecCat is the floor: a bare os/exec loop of cat with the
// same input and parallelism, nothing else.
func BenchmarkBareExecCat(b *testing.B) {
	cat, input := benchSetup(b)
	benchRun(b, func(int64) error {
		cmd := exec.Command(cat)
		cmd.Stdin = bytes.NewReader(input)
		out, err := cmd.Output()
		if err != nil || len(out) != len(input) {
			return fmt.Errorf("cat = %d bytes, %v", len(out), err)
		}
		return nil
	})
}

func benchSetup(b *testing.B) (string, []byte) {
	cat, err := exec.LookPath("cat")
	if err != nil {
		b.Skip("cat not installed")
	}
	return cat, bytes.Repeat([]byte("0123456789abcdef"), 64)
}

// benchRun runs op b.N times from benchParallelism goroutines and
// reports tasks/s and CPU time per task, of this process and of its
// children.
func benchRun(b *testing.B, op func(i int64) error) {
	self0, kids0 := cpu(syscall.RUSAGE_SELF), cpu(syscall.RUSAGE_CHILDREN)
	b.ResetTimer()
	var next atomic.Int64
	var wg sync.WaitGroup
	for range benchParallelism {
		wg.Go(func() {
			for i := next.Add(1); i <= int64(b.N); i = next.Add(1) {
				if err := op(i); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	self, kids := cpu(syscall.RUSAGE_SELF)-self0, cpu(syscall.RUSAGE_CHILDREN)-kids0
	n := float64(b.N)
	b.ReportMetric(n/b.Elapsed().Seconds(), "tasks/s")
	b.ReportMetric(float64(self.Microseconds())/n, "worker-cpu-µs/task")
	b.ReportMetric(float64(kids.Microseconds())/n, "child-cpu-µs/task")
}

// cpu is user plus system CPU time of who.
func cpu(who int) time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(who, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkPersistentEcho measures Pool.Run in mode persistent with a Go
// echo child (the test binary's helper) and 1 KiB of input, to be read
// against BenchmarkBareFrameLoop from the same run.
func BenchmarkPersistentEcho(b *testing.B) {
	self, input := benchSelf(b)
	p, err := NewPool(Options{Mode: ModePersistent, BinaryPath: self, Args: []string{"exec-helper"},
		PoolSize: benchParallelism, Timeout: time.Minute, MaxAttempts: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	ctx := context.Background()
	if res := p.Run(ctx, &model.Task{ID: "warm", Input: input}); res.Status != model.StatusOK {
		b.Fatal(res.Err)
	}
	benchRun(b, func(i int64) error {
		task := &model.Task{ID: fmt.Sprint("bench-", i), Input: input, Labels: map[string]string{"tenant": "bench"},
			Msg: &model.Message{Source: model.SourceKafka, Alias: "bench", Partition: 1, Offset: i, Key: []byte("key")}}
		res := p.Run(ctx, task)
		if res.Status != model.StatusOK || len(res.Output) != len(input) {
			return fmt.Errorf("Run = %s, %d bytes, %v", res.Status, len(res.Output), res.Err)
		}
		return nil
	})
}

// BenchmarkBareFrameLoop is the floor of mode persistent: the same echo
// children and frames, each driven by its own goroutine with nothing else
// (no pool, no timeouts, no stderr, no result parsing beyond the frame).
func BenchmarkBareFrameLoop(b *testing.B) {
	self, input := benchSelf(b)
	type child struct {
		w   io.Writer
		r   *bufio.Reader
		cmd *exec.Cmd
	}
	children := make(chan *child, benchParallelism)
	for range benchParallelism {
		cmd := exec.Command(self, "exec-helper")
		cmd.Env = []string{"SVC_EXECUTOR_MODE=persistent"}
		w, _ := cmd.StdinPipe()
		r, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		c := &child{w: w, r: bufio.NewReaderSize(r, 64<<10), cmd: cmd}
		if _, _, err := readFrame(c.r, 0); err != nil {
			b.Fatal(err)
		}
		defer func() { w.Close(); _ = cmd.Wait() }()
		children <- c
	}
	benchRun(b, func(i int64) error {
		c := <-children
		defer func() { children <- c }()
		frame, _ := encodeTask(nil, &model.Task{ID: fmt.Sprint("bench-", i), Input: input}, 1)
		if _, err := c.w.Write(frame); err != nil {
			return err
		}
		_, body, err := readFrame(c.r, 1<<20)
		if err != nil || len(body) != len(input) {
			return fmt.Errorf("frame = %d bytes, %v", len(body), err)
		}
		return nil
	})
}

func benchSelf(b *testing.B) (string, []byte) {
	self, err := os.Executable()
	if err != nil {
		b.Skip(err)
	}
	return self, bytes.Repeat([]byte("0123456789abcdef"), 64)
}

// BenchmarkPersistentRoundTrip measures one task at a time through a
// persistent pool of one Go echo child, 1 KiB of input: the latency of a
// round trip, and the CPU time and allocations it costs the worker.
func BenchmarkPersistentRoundTrip(b *testing.B) {
	self, input := benchSelf(b)
	p, err := NewPool(Options{Mode: ModePersistent, BinaryPath: self, Args: []string{"exec-helper"},
		PoolSize: 1, Timeout: time.Minute, MaxAttempts: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	ctx := context.Background()
	task := &model.Task{ID: "bench", Input: input, Labels: map[string]string{"tenant": "bench"},
		Msg: &model.Message{Source: model.SourceKafka, Alias: "bench", Partition: 1, Offset: 1, Key: []byte("key")}}
	if res := p.Run(ctx, task); res.Status != model.StatusOK {
		b.Fatal(res.Err)
	}
	b.ReportAllocs()
	self0 := cpu(syscall.RUSAGE_SELF)
	for b.Loop() {
		if res := p.Run(ctx, task); res.Status != model.StatusOK || len(res.Output) != len(input) {
			b.Fatalf("Run = %s, %d bytes, %v", res.Status, len(res.Output), res.Err)
		}
	}
	b.ReportMetric(float64((cpu(syscall.RUSAGE_SELF)-self0).Nanoseconds())/float64(b.N), "worker-cpu-ns/op")
}

// BenchmarkChildPreTaskLook measures what a persistent task does before
// its frame is sent, on empty stdout and stderr pipes (the usual case):
// "stray" is the look for stray stdout output alone (one non-blocking
// read), "reads" one non-blocking read of each pipe (the look before
// quiet), "poll" one ppoll(2) of both (child.quiet), which then needs no
// read.
func BenchmarkChildPreTaskLook(b *testing.B) {
	var pp pipes
	if err := pp.open(3); err != nil {
		b.Fatal(err)
	}
	defer pp.closeParent()
	defer pp.closeChild()
	c := &child{stdout: pp.parent[1], r: bufio.NewReaderSize(pp.parent[1], 64<<10), stderr: newExecStderr(pp.parent[2], 1024)}
	c.initPeek()
	c.initQuiet()
	if c.outRC == nil || c.quietOut == nil {
		b.Fatal("stdout is not non-blocking, or no poll")
	}
	b.Run("stray", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if n, _ := c.stray(true); n != 0 {
				b.Fatalf("stray = %d bytes on an empty pipe", n)
			}
		}
	})
	b.Run("reads", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if n, _ := c.stray(true); n != 0 || c.stderr.take() != nil {
				b.Fatal("output on an empty pipe")
			}
		}
	})
	b.Run("poll", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if out, errOut := c.quiet(); out || errOut {
				b.Fatal("output on an empty pipe")
			}
			c.stderr.discard()
		}
	})
}

// BenchmarkParseResult decodes echo-go's result header (status, task echo,
// one annotation) as every persistent-mode task does. Annotation payloads
// stay raw JSON (model.Annotation.Payload): decoding them into maps and
// encoding them again for the recorder cost a Kafka task about 10 % of the
// worker's CPU.
func BenchmarkParseResult(b *testing.B) {
	header := []byte(`{"type":"result","task_id":"3f1c9a2b7d10-17","attempt":1,"status":"ok","annotations":[{"kind":"echo.size","payload":{"attempt":1,"bytes":1024}}]}`)
	b.ReportAllocs()
	for b.Loop() {
		var res model.AttemptResult
		if _, err := parseResult(header, &res); err != nil || len(res.Annotations) != 1 {
			b.Fatal(err)
		}
	}
}

// BenchmarkEncodeTask builds the task frame of a keyed 1 KiB Kafka message
// into a reused buffer, as every persistent-mode attempt does. Through
// json.Marshal it took 5 allocations and 360 B per task.
func BenchmarkEncodeTask(b *testing.B) {
	t := &model.Task{ID: "3f1c9a2b7d10-17", Input: bytes.Repeat([]byte("x"), 1024),
		Msg: &model.Message{Source: model.SourceKafka, Alias: "source", Partition: 4, Offset: 123456, Key: []byte("key-0042")}}
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		frame, err := encodeTask(buf[:0], t, 1)
		if err != nil {
			b.Fatal(err)
		}
		buf = frame
	}
}
