package recorder

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"zombiezen.com/go/sqlite"

	"svc/worker/event"
)

// emitTask emits what the worker emits for one task (worker/model/events.go):
// task_received, executor_started, executor_finished, an annotation, then
// the task row. received is task_received's payload; status and stderr
// shape the attempt.
func emitTask(r *Recorder, clk *clock, id, source, received, status string, stderr bool, row event.TaskRow) {
	labels := row.Labels
	clk.tick()
	r.Event(event.Event{Type: event.TypeTaskReceived, TaskID: id, Labels: labels, Payload: json.RawMessage(received)})
	clk.tick()
	r.Event(event.Event{Type: event.TypeExecutorStarted, TaskID: id, Labels: labels, Payload: json.RawMessage(`{"attempt":1}`)})
	clk.add(7 * time.Millisecond)
	fin := `{"attempt":1,"status":"` + status + `","exit_code":0,"duration_ms":7,"output_size_bytes":5`
	if stderr {
		fin += `,"stderr_tail":"warn"`
	}
	fin += `,"stdout_tail":"hello"}`
	r.Event(event.Event{Type: event.TypeExecutorFinished, TaskID: id, Labels: labels, Payload: json.RawMessage(fin)})
	r.Event(event.Event{Type: event.TypeAnnotation, Kind: "echo.size", TaskID: id, Labels: labels, Payload: json.RawMessage(`{"attempt":1,"bytes":5}`)})
	row.TaskID, row.Source, row.Status, row.Attempts, row.OutputSizeBytes = id, source, status, 1, 5
	if status != "ok" {
		row.Error = "exit status 1"
	}
	clk.tick()
	r.Task(row)
}

// emitPlainTask emits a successful task without annotations.
func emitPlainTask(r *Recorder, clk *clock, id string) {
	clk.tick()
	r.Event(event.Event{Type: event.TypeTaskReceived, TaskID: id, Payload: json.RawMessage(`{"source":"http","input_size_bytes":4}`)})
	r.Event(event.Event{Type: event.TypeExecutorStarted, TaskID: id, Payload: json.RawMessage(`{"attempt":1}`)})
	r.Event(event.Event{Type: event.TypeExecutorFinished, TaskID: id, Payload: json.RawMessage(`{"attempt":1,"status":"ok","exit_code":0,"duration_ms":7,"output_size_bytes":5}`)})
	clk.tick()
	r.Task(event.TaskRow{TaskID: id, Source: "http", Status: "ok", Attempts: 1, DurationMs: 7, OutputSizeBytes: 5, Partition: -1, Offset: -1})
}

// storedEventRows counts taskID's rows in the events table of the live file.
func storedEventRows(t *testing.T, r *Recorder, taskID string) map[string]string {
	t.Helper()
	got := map[string]string{}
	err := r.withLive(t.Context(), func(db *sqlite.Conn) error {
		return query(db, `SELECT type, payload FROM events WHERE task_id = ?`, func(st *sqlite.Stmt) error {
			got[st.ColumnText(0)] = st.ColumnText(1)
			return nil
		}, taskID)
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// traceLines renders a trace as "id ts type kind labels payload" lines.
func traceLines(t *testing.T, r *Recorder, taskID string) []string {
	t.Helper()
	evs, err := r.Trace(context.Background(), taskID)
	if err != nil {
		t.Fatalf("Trace(%s) error = %v", taskID, err)
	}
	var out []string
	for _, e := range evs {
		labels, _ := json.Marshal(e.Labels)
		out = append(out, fmt.Sprintf("%d %d %s %s %s %s %s", e.ID, e.TSms, e.Type, e.Kind, e.Worker, labels, e.Payload))
	}
	return out
}

// A task that succeeded at its first attempt keeps no lifecycle event rows
// in the live file, yet traces exactly as emitted (stdout tail aside), from
// the live file, a sealed file and an archive; failures, stderr and
// history.task_detail = "full" keep every row and the stdout tail.
func TestSummarizedTasks(t *testing.T) {
	t.Parallel()
	clk := newClock()
	shared := t.TempDir()
	cfg := baseConfig(t, t.TempDir(), shared, "w1", clk)
	cfg.ArchiveEnabled = true
	r := mustOpen(t, cfg)
	startRun(t, r)

	kafkaRow := event.TaskRow{Alias: "orders", Partition: 3, Offset: 41, Key: "k-7",
		KeyEncoding: "utf-8", Env: map[string]string{"SVC_KEY_ENCODING": "utf-8"}, Labels: map[string]string{"order": "7"}}
	emitTask(r, clk, "t-kafka", "kafka",
		`{"source":"kafka","alias":"orders","partition":3,"offset":41,"key":"k-7","key_encoding":"utf-8","input_size_bytes":12}`,
		"ok", false, kafkaRow)
	emitTask(r, clk, "t-http", "http", `{"source":"http","input_size_bytes":1024}`, "ok", false,
		event.TaskRow{Partition: -1, Offset: -1})
	emitTask(r, clk, "t-failed", "http", `{"source":"http","input_size_bytes":4}`, "failed", false,
		event.TaskRow{Partition: -1, Offset: -1})
	emitTask(r, clk, "t-stderr", "http", `{"source":"http","input_size_bytes":4}`, "ok", true,
		event.TaskRow{Partition: -1, Offset: -1})
	waitWritten(t, r, 4*4, 4)
	if s := r.Stats(); s.EventsSummarized != 8 {
		t.Errorf("EventsSummarized = %d, want 8 (three lifecycle events and the annotation of each of the two plain successes)", s.EventsSummarized)
	}

	want := map[string][]string{}
	for _, id := range []string{"t-kafka", "t-http"} {
		rows := storedEventRows(t, r, id)
		if len(rows) != 0 {
			t.Errorf("%s: event rows %v, want none (lifecycle and annotation folded into the task row)", id, rows)
		}
		want[id] = traceLines(t, r, id)
		if len(want[id]) != 4 {
			t.Fatalf("%s: trace %d events, want 4:\n%s", id, len(want[id]), strings.Join(want[id], "\n"))
		}
		for _, l := range want[id] {
			if strings.Contains(l, "stdout_tail") {
				t.Errorf("%s: summarized trace keeps a stdout tail: %s", id, l)
			}
		}
	}
	// Exactly the emitted events: ids, times, labels, payload bytes.
	base := int64(t0)
	got := strings.Join(want["t-kafka"], "\n")
	for _, sub := range []string{
		fmt.Sprintf(" %d task_received  w1 {\"order\":\"7\"} {\"source\":\"kafka\",\"alias\":\"orders\",\"partition\":3,\"offset\":41,\"key\":\"k-7\",\"key_encoding\":\"utf-8\",\"input_size_bytes\":12}", base+1),
		fmt.Sprintf(" %d executor_started  w1 {\"order\":\"7\"} {\"attempt\":1}", base+2),
		fmt.Sprintf(" %d executor_finished  w1 {\"order\":\"7\"} {\"attempt\":1,\"status\":\"ok\",\"exit_code\":0,\"duration_ms\":7,\"output_size_bytes\":5}", base+9),
		fmt.Sprintf(" %d annotation echo.size w1 {\"order\":\"7\"} {\"attempt\":1,\"bytes\":5}", base+9),
	} {
		if !strings.Contains(got, sub) {
			t.Errorf("kafka task trace lacks %q:\n%s", sub, got)
		}
	}
	for _, id := range []string{"t-failed", "t-stderr"} {
		rows := storedEventRows(t, r, id)
		if len(rows) != 4 || !strings.Contains(rows["executor_finished"], `"stdout_tail":"hello"`) {
			t.Errorf("%s: event rows %v, want all four with the stdout tail", id, rows)
		}
	}

	// The same traces from a sealed file, then from an archive.
	seal(t, r)
	for id, w := range want {
		if got := traceLines(t, r, id); strings.Join(got, "\n") != strings.Join(w, "\n") {
			t.Errorf("%s from a sealed file:\n%s\nwant\n%s", id, strings.Join(got, "\n"), strings.Join(w, "\n"))
		}
	}
	clk.add(2 * time.Hour)
	if err := r.archivePass(t.Context()); err != nil {
		t.Fatalf("archivePass() error = %v", err)
	}
	if k := kinds(t, r); k["archive"] != 1 || k["sealed"] != 0 {
		t.Fatalf("after archiving: %v", k)
	}
	// Archives renumber event rows (rebuilt events keep the writer's ids),
	// so events of one millisecond may come in another order.
	withoutIDs := func(lines []string) string {
		var out []string
		for _, l := range lines {
			_, rest, _ := strings.Cut(l, " ")
			out = append(out, rest)
		}
		slices.Sort(out)
		return strings.Join(out, "\n")
	}
	for id, w := range want {
		if got := traceLines(t, r, id); withoutIDs(got) != withoutIDs(w) {
			t.Errorf("%s from an archive:\n%s\nwant\n%s", id, strings.Join(got, "\n"), strings.Join(w, "\n"))
		}
	}
}

// history.task_detail = "full" stores every event as a row, tail included.
func TestSummariesOff(t *testing.T) {
	t.Parallel()
	clk := newClock()
	cfg := baseConfig(t, t.TempDir(), "", "w1", clk)
	cfg.FullDetail = true
	r := mustOpen(t, cfg)
	startRun(t, r)
	emitTask(r, clk, "t1", "http", `{"source":"http","input_size_bytes":1024}`, "ok", false, event.TaskRow{Partition: -1, Offset: -1})
	waitWritten(t, r, 4, 1)
	rows := storedEventRows(t, r, "t1")
	if len(rows) != 4 || !strings.Contains(rows["executor_finished"], `"stdout_tail":"hello"`) {
		t.Errorf("event rows %v, want all four with the stdout tail", rows)
	}
	if s := r.Stats(); s.EventsSummarized != 0 {
		t.Errorf("EventsSummarized = %d, want 0", s.EventsSummarized)
	}
}

// A task still running after summaryHold has its events written as rows
// (a trace of an in-flight task, or of a worker that then dies, shows
// them); its row, arriving later, is stored as it is.
func TestSlowTaskEventsAreWritten(t *testing.T) {
	t.Parallel()
	clk := newClock()
	cfg := baseConfig(t, t.TempDir(), "", "w1", clk)
	r := mustOpen(t, cfg)
	startRun(t, r)
	r.Event(event.Event{Type: event.TypeTaskReceived, TaskID: "slow", Payload: json.RawMessage(`{"source":"http","input_size_bytes":1}`)})
	r.Event(event.Event{Type: event.TypeExecutorStarted, TaskID: "slow", Payload: json.RawMessage(`{"attempt":1}`)})
	waitWritten(t, r, 2, 0)
	if rows := storedEventRows(t, r, "slow"); len(rows) != 2 {
		t.Fatalf("event rows of a running task %v, want received and started", rows)
	}
	r.Event(event.Event{Type: event.TypeExecutorFinished, TaskID: "slow", Payload: json.RawMessage(`{"attempt":1,"status":"ok","exit_code":0,"duration_ms":1500,"output_size_bytes":1,"stdout_tail":"x"}`)})
	r.Task(event.TaskRow{TaskID: "slow", Source: "http", Status: "ok", Attempts: 1, Partition: -1, Offset: -1, OutputSizeBytes: 1})
	waitWritten(t, r, 3, 1)
	rows := storedEventRows(t, r, "slow")
	if len(rows) != 3 || strings.Contains(rows["executor_finished"], "stdout_tail") {
		t.Errorf("event rows %v, want three, the finished one without the stdout tail of a successful first attempt", rows)
	}
	if lines := traceLines(t, r, "slow"); len(lines) != 3 {
		t.Errorf("trace = %v, want each event once", lines)
	}
}

// A worker that stops with tasks waiting writes their events before it
// seals: nothing emitted is lost to the summary's wait.
func TestShutdownWritesWaitingEvents(t *testing.T) {
	t.Parallel()
	clk := newClock()
	shared := t.TempDir()
	r := mustOpen(t, baseConfig(t, t.TempDir(), shared, "w1", clk))
	stop := startRun(t, r)
	r.Event(event.Event{Type: event.TypeTaskReceived, TaskID: "cut", Payload: json.RawMessage(`{"source":"http","input_size_bytes":1}`)})
	r.Event(event.Event{Type: event.TypeExecutorStarted, TaskID: "cut", Payload: json.RawMessage(`{"attempt":1}`)})
	if err := stop(); err != nil {
		t.Fatalf("Run() = %v", err)
	}
	matches, _ := filepath.Glob(filepath.Join(shared, "history", "c1", "w1-*.db"))
	if len(matches) != 1 {
		t.Fatalf("sealed files %v, want one", matches)
	}
	db, err := openReadOnly(t.Context(), matches[0])
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := scan(db, `SELECT count(*) FROM events WHERE task_id = 'cut'`, []any{&n}); err != nil || n != 2 {
		t.Errorf("sealed file holds %d events of the cut task (%v), want 2", n, err)
	}
}

// Above SampleAbove plain successful tasks a second, the rest of that
// second's rows are counted, not stored; failures and annotations always
// are, and Counts stay exact.
func TestSamplingAboveARate(t *testing.T) {
	t.Parallel()
	clk := newClock()
	cfg := baseConfig(t, t.TempDir(), "", "w1", clk)
	cfg.SampleAbove = 50
	r := mustOpen(t, cfg)
	startRun(t, r)
	const ok, failed, annotated = 300, 10, 30
	for i := range ok {
		id := fmt.Sprint("ok-", i)
		if i%(ok/annotated) == 1 {
			// An annotated task folds its annotation into its row: stored.
			emitTask(r, clk, id, "http", `{"source":"http","input_size_bytes":4}`, "ok", false, event.TaskRow{Partition: -1, Offset: -1})
		} else {
			emitPlainTask(r, clk, id)
		}
		if i%(ok/failed) == 0 {
			emitTask(r, clk, fmt.Sprint("bad-", i), "http", `{"source":"http","input_size_bytes":4}`, "failed", false, event.TaskRow{Partition: -1, Offset: -1})
		}
	}
	waitStats(t, r, "every task row stored or sampled", func(s Stats) bool { return s.TasksWritten+s.TasksSampled == ok+failed })
	s := r.Stats()
	if s.TasksSampled == 0 || s.TasksWritten > failed+annotated+2*50+50 {
		t.Errorf("stored %d task rows and sampled %d, want at most %d plain successful rows a second stored", s.TasksWritten, s.TasksSampled, 50)
	}
	c, err := r.Counts(t.Context())
	if err != nil || c.BySource["http"]["ok"] != ok || c.BySource["http"]["failed"] != failed || c.Incomplete {
		t.Errorf("Counts() = %+v, %v; want exactly %d ok and %d failed", c, err, ok, failed)
	}
	var rows, badRows int
	r.withLive(t.Context(), func(db *sqlite.Conn) error {
		scan(db, `SELECT count(*) FROM tasks`, []any{&rows})
		return scan(db, `SELECT count(*) FROM tasks WHERE status = 'failed'`, []any{&badRows})
	})
	// Annotations of stored rows are folded into them, those of sampled
	// rows stored as event rows: the API lists every one.
	evs, err := r.Events(t.Context(), EventQuery{Types: []string{event.TypeAnnotation}, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	notes := len(evs)
	var annotatedRows int
	r.withLive(t.Context(), func(db *sqlite.Conn) error {
		return scan(db, `SELECT count(*) FROM tasks WHERE sum_ann_top != 0`, []any{&annotatedRows})
	})
	if uint64(rows) != s.TasksWritten || badRows != failed || notes != annotated+failed || annotatedRows != annotated {
		t.Errorf("live file: %d task rows (%d failed, %d holding annotations), %d annotations; want %d rows, every failure, every annotated task and all %d annotations",
			rows, badRows, annotatedRows, notes, s.TasksWritten, annotated+failed)
	}
	if h := r.History(); h.TasksSampled != s.TasksSampled || h.SampleAbovePerSecond != 50 {
		t.Errorf("History() sampling = %d above %d/s, want %d above 50/s", h.TasksSampled, h.SampleAbovePerSecond, s.TasksSampled)
	}
}

// TestEncodeStringMapMatchesMarshal: labels and env are stored exactly as
// json.Marshal wrote them before (keys sorted, HTML escaped, invalid
// UTF-8 replaced), so rows written before and after read the same.
func TestEncodeStringMapMatchesMarshal(t *testing.T) {
	cases := []map[string]string{
		{"a": "b"},
		{"SVC_KEY_ENCODING": "utf-8"},
		{"SVC_KEY_ENCODING": "base64", "TOKEN": "***"},
		{"z": "1", "a": "2", "m": "<&>", "ü": "é\u2028", "q\"uote": "back\\slash", "ctl": "\x00\x1f", "bad": "\xff\xfe"},
	}
	rng := rand.New(rand.NewPCG(7, 9))
	alphabet := []string{"a", "Z", "0", " ", "\"", "\\", "<", ">", "&", "é", "\u2028", "\x7f", "\xff", "\n", "日"}
	for range 200 {
		m := map[string]string{}
		for range rng.IntN(5) + 1 {
			var k, v strings.Builder
			for range rng.IntN(6) {
				k.WriteString(alphabet[rng.IntN(len(alphabet))])
			}
			for range rng.IntN(8) {
				v.WriteString(alphabet[rng.IntN(len(alphabet))])
			}
			m[k.String()] = v.String()
		}
		cases = append(cases, m)
	}
	for _, m := range cases {
		want, _ := json.Marshal(m)
		if got := encodeStringMap(m); got != string(want) {
			t.Fatalf("encodeStringMap(%q) = %s, want %s", m, got, want)
		}
	}
}
