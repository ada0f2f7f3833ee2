package recorder

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

var (
	historyGB     = flag.Float64("history.gb", 10, "BenchmarkHistoryAtSize: size of the cluster folder to build, in GB (scaled down to what the disk holds)")
	historyDir    = flag.String("history.dir", "", "BenchmarkHistoryAtSize: folder to build it in (default: a temp folder); removed afterwards")
	historyRounds = flag.Int("history.rounds", 40, "BenchmarkHistoryAtSize: rounds of queries per measurement")
)

// Environment of the reader child of BenchmarkHistoryAtSize.
const (
	readerEnvShared = "RECORDER_SIZE_READER_SHARED"
	readerEnvNow    = "RECORDER_SIZE_READER_NOW"
	readerEnvRounds = "RECORDER_SIZE_READER_ROUNDS"
)

// sizeReport is what the reader child measured.
type sizeReport struct {
	Files    int                `json:"files"`     // databases listed
	RSSStart int64              `json:"rss_start"` // after Open and the live tasks, before the queries
	RSSEnd   int64              `json:"rss_end"`   // after the queries
	HWM      int64              `json:"hwm"`       // peak RSS of the child
	P50      map[string]float64 `json:"p50"`       // milliseconds
	P99      map[string]float64 `json:"p99"`
	Cold     []float64          `json:"cold"` // first trace of each distinct archive (inflation), ms
}

// BenchmarkHistoryAtSize builds a cluster folder holding -history.gb GB of
// history and measures, in a fresh reader process, the latency of trace,
// trace-by-label, events, task results and the databases list, and the
// reader's RSS, first with a tenth of the history and then with all of it:
// neither may grow with the history. The history is one realistic 128 MB
// archive part (50,000 tasks) copied under one window name per copy, with
// its .meta.json (and .idx) set to that window; three archive parts of
// their own tasks (one of 50,000, two of 5,000), two sealed files and the
// reader's live file hold the tasks that are looked up. The copies share
// their tasks, so no query looks up one of those: a real task lives in one
// window. Run it with -benchtime=1x; the folder is removed afterwards.
func BenchmarkHistoryAtSize(b *testing.B) {
	root := *historyDir
	if root == "" {
		root = b.TempDir()
	} else {
		if err := os.MkdirAll(root, 0o700); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { os.RemoveAll(root) })
	}
	target := int64(*historyGB * 1e9)
	var st syscall.Statfs_t
	if err := syscall.Statfs(root, &st); err == nil {
		if free := int64(st.Bavail) * st.Bsize; target > free*2/3 {
			b.Logf("scaling down: %.1f GB free at %s, building %.1f GB instead of %.1f", float64(free)/1e9, root, float64(free*2/3)/1e9, float64(target)/1e9)
			target = free * 2 / 3
		}
	}
	window := DefaultArchiveWindow.Milliseconds()
	now := time.UnixMilli(t0).Add(1000 * time.Hour)
	nowMs := now.UnixMilli()
	windowAt := func(back int64) int64 { w := nowMs - back*window; return w - w%window }

	// The fixture parts: the base (to be copied) and three distinct ones,
	// folded by a holder like any archive pass would.
	built := time.Now()
	work := b.TempDir()
	sealedInto(b, work, "base", time.UnixMilli(windowAt(10000)+1000), 50000)
	sealedInto(b, work, "d0", time.UnixMilli(windowAt(6)+1000), 50000)
	sealedInto(b, work, "d1", time.UnixMilli(windowAt(5)+1000), 5000)
	sealedInto(b, work, "d2", time.UnixMilli(windowAt(4)+1000), 5000)
	clk := &clock{}
	clk.ms.Store(nowMs)
	holderCfg := baseConfig(b, "", work, "holder", clk)
	holderCfg.ArchiveEnabled, holderCfg.ArchiveAfter, holderCfg.ArchiveWindow = true, time.Minute, DefaultArchiveWindow
	holderCfg.MaxBytes, holderCfg.MaxAge = 1<<50, 3650*24*time.Hour
	holder := mustOpen(b, holderCfg)
	if err := holder.archivePass(context.Background()); err != nil {
		b.Fatal(err)
	}
	holder.Close()
	c1 := filepath.Join(root, "history", "c1")
	copyFolder(b, filepath.Join(work, "history", "c1"), c1)
	os.RemoveAll(work)
	sealedInto(b, root, "s0", time.UnixMilli(windowAt(2)+1000), 2000)
	sealedInto(b, root, "s1", time.UnixMilli(windowAt(1)+1000), 2000)

	baseName := archiveName("c1", windowAt(10000), 0)
	base, err := os.ReadFile(filepath.Join(c1, baseName))
	if err != nil {
		b.Fatal(err)
	}
	var baseMeta fileMeta
	if data, err := os.ReadFile(filepath.Join(c1, baseName+".meta.json")); err != nil || json.Unmarshal(data, &baseMeta) != nil {
		b.Fatalf("base meta: %v", err)
	}
	baseIdx, _ := os.ReadFile(filepath.Join(c1, baseName+".idx"))
	for _, suffix := range []string{"", ".meta.json", ".idx"} {
		os.Remove(filepath.Join(c1, baseName+suffix))
	}
	perCopy := int64(len(base) + len(baseIdx) + 400)
	copies := 0
	addCopies := func(bytes int64) {
		for n := bytes / perCopy; n > 0; n-- {
			ws := windowAt(int64(10 + copies))
			copies++
			name := archiveName("c1", ws, 0)
			m := baseMeta
			m.FromMs, m.ToMs = ws+1000, ws+window-1000
			meta, _ := json.Marshal(m)
			for suffix, data := range map[string][]byte{"": base, ".meta.json": meta, ".idx": baseIdx} {
				if suffix == ".idx" && len(data) == 0 {
					continue
				}
				if err := os.WriteFile(filepath.Join(c1, name+suffix), data, 0o600); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	addCopies(target / 10)
	fmt.Printf("fixture: base part %.1f MB (%d tasks, %.1f MB inflated), %d copies, built in %s\n",
		float64(len(base))/1e6, baseMeta.Tasks, float64(baseMeta.InflatedBytes)/1e6, copies, time.Since(built).Round(time.Second))

	small := runSizeReader(b, root, nowMs)
	logSizeReport(b, "tenth", root, small)
	addCopies(target - target/10)
	var full sizeReport
	for b.Loop() {
		full = runSizeReader(b, root, nowMs)
	}
	logSizeReport(b, "full", root, full)
	for _, q := range slices.Sorted(maps.Keys(full.P99)) {
		b.ReportMetric(full.P99[q], "p99-"+q+"-ms")
	}
	b.ReportMetric(float64(full.HWM)/(1<<20), "peak-rss-MiB")
	b.ReportMetric(float64(small.HWM)/(1<<20), "peak-rss-tenth-MiB")
	b.ReportMetric(folderGB(b, root), "history-GB")
}

// folderGB is the size of root's files, in GB.
func folderGB(tb testing.TB, root string) float64 {
	var n int64
	filepath.Walk(root, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			n += fi.Size()
		}
		return nil
	})
	return float64(n) / 1e9
}

func logSizeReport(b *testing.B, stage, root string, r sizeReport) {
	var lines []string
	for _, q := range slices.Sorted(maps.Keys(r.P99)) {
		lines = append(lines, fmt.Sprintf("%-16s p50 %7.1f ms  p99 %7.1f ms", q, r.P50[q], r.P99[q]))
	}
	fmt.Printf("%s: %.2f GB, %d databases; RSS %.0f MiB before the queries, %.0f after, peak %.0f; cold traces %v ms\n%s\n",
		stage, folderGB(b, root), r.Files, float64(r.RSSStart)/(1<<20), float64(r.RSSEnd)/(1<<20), float64(r.HWM)/(1<<20),
		r.Cold, strings.Join(lines, "\n"))
}

// runSizeReader runs TestHistorySizeReader in a new process on root and
// returns its report.
func runSizeReader(b *testing.B, root string, nowMs int64) sizeReport {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHistorySizeReader$")
	cmd.Env = append(os.Environ(), readerEnvShared+"="+root, readerEnvNow+"="+strconv.FormatInt(nowMs, 10),
		readerEnvRounds+"="+strconv.Itoa(*historyRounds))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		b.Fatalf("reader: %v\n%s", err, out.String())
	}
	sc := bufio.NewScanner(&out)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if line, ok := strings.CutPrefix(sc.Text(), "SIZE_REPORT "); ok {
			var r sizeReport
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				b.Fatal(err)
			}
			return r
		}
	}
	b.Fatalf("reader printed no report:\n%s", out.String())
	return sizeReport{}
}

// TestHistorySizeReader is the reader process of BenchmarkHistoryAtSize;
// it does nothing unless started by it. It opens a worker on the folder
// (archiving off: nothing is deleted), records 2,000 live tasks, runs the
// query rounds and prints its report.
func TestHistorySizeReader(t *testing.T) {
	shared := os.Getenv(readerEnvShared)
	if shared == "" {
		t.Skip("reader process of BenchmarkHistoryAtSize")
	}
	nowMs, _ := strconv.ParseInt(os.Getenv(readerEnvNow), 10, 64)
	rounds, _ := strconv.Atoi(os.Getenv(readerEnvRounds))
	clk := &clock{}
	clk.ms.Store(nowMs)
	cfg := baseConfig(t, t.TempDir(), shared, "reader", clk)
	cfg.ArchiveEnabled = false
	r := mustOpen(t, cfg)
	startRun(t, r)
	recordTasks(t, r, "live", 2000)
	ctx := context.Background()
	rep := sizeReport{RSSStart: rssBytes(), P50: map[string]float64{}, P99: map[string]float64{}}
	times := map[string][]float64{}
	timed := func(name string, f func() (int, error), want func(int) bool) {
		start := time.Now()
		n, err := f()
		ms := float64(time.Since(start).Microseconds()) / 1000
		if err != nil || !want(n) {
			t.Fatalf("%s: %d results, %v", name, n, err)
		}
		times[name] = append(times[name], ms)
	}
	some := func(n int) bool { return n > 0 }
	none := func(n int) bool { return n == 0 }
	trace := func(id string) func() (int, error) {
		return func() (int, error) { evs, err := r.Trace(ctx, id); return len(evs), err }
	}
	label := func(name, value string) func() (int, error) {
		return func() (int, error) { rows, err := r.TraceByLabel(ctx, name, value, 100); return len(rows), err }
	}
	// The first trace into each distinct archive inflates it.
	for _, p := range []string{"d0", "d1", "d2"} {
		start := time.Now()
		if n, err := trace(p + "-7")(); err != nil || n == 0 {
			t.Fatalf("trace %s-7: %d events, %v", p, n, err)
		}
		rep.Cold = append(rep.Cold, float64(time.Since(start).Milliseconds()))
	}
	for i := range rounds {
		timed("trace_miss", trace(fmt.Sprintf("nope-%d", i)), none)
		timed("trace_archive", trace(fmt.Sprintf("d%d-%d", i%3, i*97%5000)), some)
		timed("trace_sealed", trace(fmt.Sprintf("s%d-%d", i%2, i*31%2000)), some)
		timed("trace_live", trace(fmt.Sprintf("live-%d", i*31%2000)), some)
		timed("label_archive", label("batch", fmt.Sprintf("d%d", i%3)), some)
		timed("label_common", label("region", "eu"), some)
		timed("label_miss", label("batch", fmt.Sprintf("nope-%d", i)), none)
		timed("events", func() (int, error) { evs, err := r.Events(ctx, EventQuery{Limit: 200}); return len(evs), err }, some)
		timed("task_results", func() (int, error) { rows, err := r.TaskResults(ctx, 200); return len(rows), err }, some)
		timed("databases", func() (int, error) {
			dbs, err := r.Databases(ctx)
			rep.Files = len(dbs)
			return len(dbs), err
		}, some)
	}
	for name, ts := range times {
		slices.Sort(ts)
		rep.P50[name] = ts[len(ts)/2]
		rep.P99[name] = ts[min(len(ts)-1, len(ts)*99/100)]
	}
	rep.RSSEnd = rssBytes()
	rep.HWM = peakRSS()
	data, _ := json.Marshal(rep)
	fmt.Println("SIZE_REPORT " + string(data))
}

// peakRSS is VmHWM of /proc/self/status, in bytes.
func peakRSS() int64 {
	data, _ := os.ReadFile("/proc/self/status")
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}
