package recorder

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"svc/worker/event"
)

// diskSampler samples, every interval, the bytes on disk of the shared
// folder (every file, hidden temp files included) and of the worker's live
// file with its write-ahead log, and keeps the peaks.
type diskSampler struct {
	shared, liveGlob   string
	sharedPeak, liveMx atomic.Int64
	stop               chan struct{}
	done               sync.WaitGroup
}

func startSampler(shared, liveGlob string, every time.Duration) *diskSampler {
	s := &diskSampler{shared: shared, liveGlob: liveGlob, stop: make(chan struct{})}
	s.done.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			s.sample()
			select {
			case <-s.stop:
				s.sample()
				return
			case <-t.C:
			}
		}
	})
	return s
}

func (s *diskSampler) sample() {
	if n := treeBytes(s.shared); n > s.sharedPeak.Load() {
		s.sharedPeak.Store(n)
	}
	var live int64
	paths, _ := filepath.Glob(s.liveGlob)
	for _, p := range paths {
		if fi, err := os.Stat(p); err == nil {
			live += fi.Size()
		}
	}
	if live > s.liveMx.Load() {
		s.liveMx.Store(live)
	}
}

func (s *diskSampler) finish() (sharedPeak, livePeak int64) {
	close(s.stop)
	s.done.Wait()
	return s.sharedPeak.Load(), s.liveMx.Load()
}

// treeBytes sums the sizes of the regular files below root.
func treeBytes(root string) int64 {
	var n int64
	filepath.WalkDir(root, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// TestHistoryBudgetHeldUnderLoad: a worker writing about 10 MB a second,
// far more than its history.max_bytes, keeps the shared history within
// the budget at every moment (the seal deletes the oldest history before
// it moves a file in) and its live file within live_max_bytes plus one
// write transaction, checked after each (not once a second), and twice
// that while a seal checkpoints the write-ahead log into the file.
func TestHistoryBudgetHeldUnderLoad(t *testing.T) {
	t.Parallel()
	dir, shared := t.TempDir(), t.TempDir()
	clk := newClock()
	cfg := baseConfig(t, dir, shared, "w", clk)
	cfg.Now, cfg.StartedAt = time.Now, time.Now()
	cfg.FullDetail = true // every event is a row of its own: no summary hold
	cfg.ArchiveEnabled = true
	cfg.LiveMaxBytes, cfg.MaxBytes = 512<<10, 3<<20
	r := mustOpen(t, cfg)
	startRun(t, r)
	s := startSampler(shared, filepath.Join(dir, "recorder", "w-*.db*"), 2*time.Millisecond)
	payload := json.RawMessage(`{"stdout_tail":"` + strings.Repeat("y", 1000) + `"}`)
	const bursts, perBurst = 30, 200 // 6,000 events of about 1.2 KB: 7 MB in about 0.6 s
	for b := range bursts {
		for i := range perBurst {
			r.Event(event.Event{Type: event.TypeExecutorFinished, TaskID: "t" + itoa(b*perBurst+i), Payload: payload})
		}
		time.Sleep(20 * time.Millisecond)
	}
	waitWritten(t, r, bursts*perBurst, 0)
	sharedPeak, livePeak := s.finish()
	st := r.Stats()
	t.Logf("shared peak %d bytes (budget %d), live peak %d bytes (live_max_bytes %d); %d seals, %d files deleted for the budget",
		sharedPeak, cfg.MaxBytes, livePeak, cfg.LiveMaxBytes, st.Seals, st.DeletedBudget)
	if sharedPeak > cfg.MaxBytes {
		t.Errorf("the shared history peaked at %d bytes, over history.max_bytes %d", sharedPeak, cfg.MaxBytes)
	}
	// A transaction writes 128 KiB of rows here (liveTxBytes), with their
	// index entries and WAL frames about half live_max_bytes; a seal's
	// checkpoint holds the pages twice for a moment.
	if maxLive := 3 * cfg.LiveMaxBytes; livePeak > maxLive {
		t.Errorf("the live file peaked at %d bytes, over three times live_max_bytes (%d)", livePeak, maxLive)
	}
	if st.DeletedBudget == 0 || st.Seals < 5 {
		t.Errorf("Stats() = %d seals and %d deletions, want many of each", st.Seals, st.DeletedBudget)
	}
	// The newest events are kept: the oldest history goes first.
	if evs, err := r.Trace(t.Context(), "t"+itoa(bursts*perBurst-1)); err != nil || len(evs) != 1 {
		t.Errorf("Trace(newest) = %d events, %v; want the newest event kept", len(evs), err)
	}
}

// TestBudgetFigure measures the disk the recorder takes under load: a
// worker recording RECORDER_BUDGET_FIGURE_TPS tasks a second (default
// 2,000; each task_received, executor_started, executor_finished with a
// 1 KB stdout tail, sink_delivered and its task row, full detail) for
// RECORDER_BUDGET_FIGURE seconds, with history.max_bytes 64 MiB,
// live_max_bytes 1 MiB and the default seal, archive and window settings
// (RECORDER_BUDGET_FIGURE_AFTER sets history.archive.after).
// The shared folder (every file) and the live file with its write-ahead
// log are sampled every 100 ms. A measurement, not a check: it runs only
// when RECORDER_BUDGET_FIGURE is set.
func TestBudgetFigure(t *testing.T) {
	secs, _ := strconv.Atoi(os.Getenv("RECORDER_BUDGET_FIGURE"))
	if secs <= 0 {
		t.Skip("set RECORDER_BUDGET_FIGURE=<seconds> to measure")
	}
	tps, _ := strconv.Atoi(os.Getenv("RECORDER_BUDGET_FIGURE_TPS"))
	if tps <= 0 {
		tps = 2000
	}
	after, _ := time.ParseDuration(os.Getenv("RECORDER_BUDGET_FIGURE_AFTER")) // history.archive.after; 0: the default
	dir, shared := t.TempDir(), t.TempDir()
	cfg := Config{Dir: dir, SharedDir: shared, Worker: "w", Cluster: "c1", FullDetail: true, ArchiveAfter: after,
		ArchiveEnabled: true, LiveMaxBytes: 1 << 20, MaxBytes: 64 << 20, Logger: testLogger(t)}
	r := mustOpen(t, cfg)
	startRun(t, r)
	s := startSampler(shared, filepath.Join(dir, "recorder", "w-*.db*"), 100*time.Millisecond)
	var total atomic.Int64 // shared + live, sampled together
	stopTotal := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tk := time.NewTicker(100 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-stopTotal:
				return
			case <-tk.C:
			}
			n := treeBytes(shared)
			paths, _ := filepath.Glob(filepath.Join(dir, "recorder", "w-*.db*"))
			for _, p := range paths {
				if fi, err := os.Stat(p); err == nil {
					n += fi.Size()
				}
			}
			if n > total.Load() {
				total.Store(n)
			}
		}
	})
	rng := rand.New(rand.NewPCG(1, 2))
	tail := make([]byte, 1000)
	start := time.Now()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	sent := 0
	lastReport := start
	for time.Since(start) < time.Duration(secs)*time.Second {
		<-tick.C
		due := int(time.Since(start).Seconds() * float64(tps))
		for ; sent < due; sent++ {
			id := "task-" + strconv.Itoa(sent)
			labels := map[string]string{"customer": words[rng.IntN(6)], "region": words[3+rng.IntN(3)]}
			for i := range tail {
				tail[i] = 'a' + byte(rng.IntN(26))
			}
			fin, _ := json.Marshal(map[string]any{"attempt": 1, "status": "ok", "exit_code": 0, "duration_ms": 3, "stdout_tail": string(tail)})
			r.Event(event.Event{Type: event.TypeTaskReceived, TaskID: id, Labels: labels, Payload: json.RawMessage(`{"source":"kafka","partition":1,"offset":` + strconv.Itoa(sent) + `}`)})
			r.Event(event.Event{Type: event.TypeExecutorStarted, TaskID: id, Labels: labels, Payload: json.RawMessage(`{"attempt":1}`)})
			r.Event(event.Event{Type: event.TypeExecutorFinished, TaskID: id, Labels: labels, Payload: fin})
			r.Event(event.Event{Type: event.TypeSinkDelivered, TaskID: id, Labels: labels, Payload: json.RawMessage(`{"sink":"out","output_size_bytes":1000}`)})
			r.Task(event.TaskRow{TaskID: id, Source: "kafka", Alias: "source", Partition: 1, Offset: int64(sent), Key: id,
				Labels: labels, Status: "ok", Attempts: 1, DurationMs: 3, OutputSizeBytes: 1000})
		}
		if time.Since(lastReport) >= 30*time.Second {
			lastReport = time.Now()
			st := r.Stats()
			fmt.Printf("figure t=%.0fs tasks=%d shared_peak=%d live_peak=%d total_peak=%d seals=%d archived=%d deleted_budget=%d dropped=%d\n",
				time.Since(start).Seconds(), sent, s.sharedPeak.Load(), s.liveMx.Load(), total.Load(), st.Seals, st.ArchivedFiles, st.DeletedBudget, st.EventsDropped+st.TasksDropped)
		}
	}
	sharedPeak, livePeak := s.finish()
	close(stopTotal)
	wg.Wait()
	st := r.Stats()
	fmt.Printf("figure done: %d tasks in %s (%.0f/s); history.max_bytes %d; shared peak %d (%.3f of the budget); live peak %d; shared+live peak %d (%.3f); seals %d, archived %d, deleted for the budget %d, events written %d, dropped %d\n",
		sent, time.Since(start).Round(time.Second), float64(sent)/time.Since(start).Seconds(), cfg.MaxBytes, sharedPeak,
		float64(sharedPeak)/float64(cfg.MaxBytes), livePeak, total.Load(), float64(total.Load())/float64(cfg.MaxBytes),
		st.Seals, st.ArchivedFiles, st.DeletedBudget, st.EventsWritten, st.EventsDropped+st.TasksDropped)
}

// TestBudgetDeletionRaceCountedOnce: when another worker deleted a file
// first (both sealing at the same moment), makeRoom takes it as gone
// without counting it as its own deletion, and deletes no more than the
// budget needs.
func TestBudgetDeletionRaceCountedOnce(t *testing.T) {
	t.Parallel()
	clk := newClock()
	shared := t.TempDir()
	var sizes []int64
	for i := range 4 {
		from := int64(t0 + i*1000)
		sizes = append(sizes, writeHist(t, shared, "sealed", 0, from, from+500, 16<<10))
	}
	cfg := baseConfig(t, "", shared, "w", clk)
	cfg.ArchiveEnabled = true
	cfg.MaxBytes = sizes[2] + sizes[3] + 100 // the two newest fit
	r := mustOpen(t, cfg)
	d, err := r.openShared(false, false, r.histSegs()...)
	if err != nil {
		t.Fatal(err)
	}
	defer d.close()
	files, err := listIn(d, r.histSegs(), true)
	if err != nil {
		t.Fatal(err)
	}
	oldest := filepath.Join(shared, "history", "c1", "w-"+strconv.Itoa(t0)+"-"+strconv.Itoa(t0+500)+".db")
	os.Remove(oldest) // a peer deleted it after this worker listed the folder
	os.Remove(oldest + ".meta.json")
	left := r.makeRoom(d, files, 0, nil)
	if got := r.Stats().DeletedBudget; got != 1 {
		t.Errorf("DeletedBudget = %d, want 1 (the second oldest; the oldest was the peer's deletion)", got)
	}
	if len(left) != 2 || !traced(t, r, int64(t0+2000)) || !traced(t, r, int64(t0+3000)) {
		t.Errorf("files left = %d, want the two newest", len(left))
	}
}
