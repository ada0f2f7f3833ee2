package httpd

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"svc/worker/config"
	"svc/worker/redrive"
	"svc/worker/workertest/wait"
)

// dlqRecord is a record as the DLQ holds it: the original key, value and
// headers plus the svc-dlq-* headers and the failed task's id.
func dlqRecord(key, value string, extra ...kgo.RecordHeader) *kgo.Record {
	h := []kgo.RecordHeader{{Key: "trace", Value: []byte("t-" + key)}}
	h = append(h, extra...)
	h = append(h, kgo.RecordHeader{Key: "svc-task-id", Value: []byte("old-task")},
		kgo.RecordHeader{Key: "svc-dlq-reason", Value: []byte("executor exited with code 1")},
		kgo.RecordHeader{Key: "svc-dlq-attempts", Value: []byte("3")})
	return &kgo.Record{Topic: "orders-raw_dlq", Partition: 0, Key: []byte(key), Value: []byte(value), Headers: h}
}

// TestDLQRedrive: behind its kill switch, a dry run probes each DLQ record
// through the live handler and writes nothing; a real run re-produces the
// original key, value and headers to the source topic with svc-redrive-*
// headers, counting earlier redrives.
func TestDLQRedrive(t *testing.T) {
	if testing.Short() {
		t.Skip("two Kafka stacks, a dry run, a real run and the redriven tasks consumed: runs in the full suite")
	}
	t.Parallel()
	exe := script(t, `IFS= read -r in; case "$in" in *fail*) echo "still failing" >&2; exit 1;; esac; printf 'ok:%s' "$in"`)
	off, _ := kafkaStack(t, nil)
	r := do(t, "POST", off.uiURL+"/api/v1/debug/dlq/redrive", `{"partition":0,"from_offset":0,"dry_run":true}`)
	if r.status != 403 || !strings.Contains(r.body, "ui.redrive_enabled is false") {
		t.Fatalf("redrive with the switch off = %d %s, want 403 naming ui.redrive_enabled", r.status, r.body)
	}

	s, brokers := kafkaStack(t, func(c *config.Config) {
		c.UI.RedriveEnabled = true
		c.Executor.BinaryPath = exe
		c.Handler.MaxAttempts = 1
	})
	cl := manualProducer(t, brokers)
	recs := []*kgo.Record{dlqRecord("a", "fixed now"), dlqRecord("b", "please fail"), dlqRecord("c", "again", kgo.RecordHeader{Key: redrive.HeaderCount, Value: []byte("1")},
		kgo.RecordHeader{Key: redrive.HeaderLabel, Value: []byte("an-earlier-run")})}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{`{"from_offset":0}`, `{"partition":0}`, `{"partition":0,"from_offset":0,"from_ts":0}`, `{"partition":0,"from_offset":0,"limit":10001}`} {
		if r := do(t, "POST", s.uiURL+"/api/v1/debug/dlq/redrive", bad); r.status != 400 {
			t.Errorf("redrive %s = %d %s, want 400", bad, r.status, r.body)
		}
	}

	lines := func(body string) (out []map[string]any) {
		for _, l := range strings.Split(strings.TrimSpace(body), "\n") {
			var m map[string]any
			if err := json.Unmarshal([]byte(l), &m); err != nil {
				t.Fatalf("line %q: %v", l, err)
			}
			out = append(out, m)
		}
		return out
	}
	r = do(t, "POST", s.uiURL+"/api/v1/debug/dlq/redrive", `{"partition":0,"from_offset":0,"to_offset":1}`)
	got := lines(r.body)
	if r.status != 200 || len(got) != 3 || got[0]["outcome"] != redrive.WouldSucceed || got[1]["outcome"] != redrive.WouldFail {
		t.Fatalf("dry run (the default) = %d %s, want would_succeed, would_fail and a summary", r.status, r.body)
	}
	if sum := got[2]["summary"].(map[string]any); sum["dry_run"] != true || sum["records"] != 2.0 {
		t.Errorf("dry run summary = %v", sum)
	}
	if n := countSource(t, brokers); n != 30 {
		t.Fatalf("the source topic holds %d records after a dry run, want the 30 it had", n)
	}

	r = do(t, "POST", s.uiURL+"/api/v1/debug/dlq/redrive", `{"partition":0,"from_offset":0,"dry_run":false}`)
	got = lines(r.body)
	if r.status != 200 || len(got) != 4 || got[3]["summary"].(map[string]any)["redriven"] != 3.0 {
		t.Fatalf("redrive = %d %s, want 3 records redriven", r.status, r.body)
	}
	out := readSource(t, brokers)
	if len(out) != 33 {
		t.Fatalf("source topic holds %d records, want 33", len(out))
	}
	redriven := map[string]*kgo.Record{}
	for _, rec := range out {
		for _, x := range rec.Headers {
			if x.Key == redrive.HeaderSource {
				redriven[string(x.Value)] = rec
			}
		}
	}
	for i, want := range recs {
		rec := redriven["0:"+string(rune('0'+i))]
		if rec == nil {
			t.Fatalf("DLQ offset %d was not redriven: %v", i, redriven)
		}
		h := map[string]string{}
		for _, x := range rec.Headers {
			h[x.Key] = string(x.Value)
		}
		wantCount := map[int]string{0: "1", 1: "1", 2: "2"}[i]
		if string(rec.Key) != string(want.Key) || string(rec.Value) != string(want.Value) || h["trace"] != "t-"+string(want.Key) ||
			h[redrive.HeaderSource] != "0:"+string(rune('0'+i)) || h[redrive.HeaderCount] != wantCount || h[redrive.HeaderTS] == "" {
			t.Errorf("redriven record %d = key %q value %q headers %v", i, rec.Key, rec.Value, h)
		}
		for k := range h {
			if strings.HasPrefix(k, "svc-dlq-") || k == "svc-task-id" {
				t.Errorf("redriven record %d kept the DLQ header %s", i, k)
			}
		}
		// One redrive label, this run's (an earlier run's is dropped).
		var runs []string
		for _, x := range rec.Headers {
			if x.Key == redrive.HeaderLabel {
				runs = append(runs, string(x.Value))
			}
		}
		if run := got[3]["summary"].(map[string]any)["run"]; len(runs) != 1 || runs[0] != run {
			t.Errorf("redriven record %d carries %s = %q, want the run %v alone", i, redrive.HeaderLabel, runs, run)
		}
	}

	// The join: the worker consumes the redriven records, and the run's
	// label finds each task at the partition:offset its line names, with
	// its outcome (the second fails again).
	run := got[3]["summary"].(map[string]any)["run"].(string)
	want := map[string]string{}
	for i, l := range got[:3] {
		want[l["to"].(string)] = map[int]string{0: "ok", 1: "failed", 2: "ok"}[i]
	}
	wait.For(t, wait.Long, "the redriven records' tasks found by the run's label", func() (bool, string) {
		r := do(t, "GET", s.uiURL+"/api/v1/debug/trace-by-label?name=redrive&value="+url.QueryEscape(run), "")
		var ans struct {
			Tasks []struct {
				Alias     string `json:"alias"`
				Partition int32  `json:"partition"`
				Offset    int64  `json:"offset"`
				Status    string `json:"status"`
			} `json:"tasks"`
		}
		if r.status != 200 || json.Unmarshal([]byte(r.body), &ans) != nil {
			return false, fmt.Sprintf("%d %s", r.status, r.body)
		}
		found := map[string]string{}
		for _, tk := range ans.Tasks {
			if tk.Alias == "source" {
				found[fmt.Sprintf("%d:%d", tk.Partition, tk.Offset)] = tk.Status
			}
		}
		return fmt.Sprint(found) == fmt.Sprint(want), fmt.Sprintf("found %v, want %v", found, want)
	})
}

func countSource(t *testing.T, brokers []string) int { return len(readSource(t, brokers)) }

// readSource reads the whole source topic of kafkaStack.
func readSource(t *testing.T, brokers []string) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics("orders-raw"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var out []*kgo.Record
	for idle := 0; idle < 5; {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		f := cl.PollFetches(ctx)
		cancel()
		n := 0
		f.EachRecord(func(r *kgo.Record) { out = append(out, r); n++ })
		if n == 0 {
			idle++
		}
	}
	return out
}

// TestDLQRedriveOnce: concurrent real redrives of the same DLQ records
// redrive each once (a call overlapping another on the same partition
// answers 409; one after it skips the records as duplicates); "again":
// true redrives them again; the worker remembers across a restart.
func TestDLQRedriveOnce(t *testing.T) {
	t.Parallel()
	storage := t.TempDir()
	tune := func(c *config.Config) {
		c.UI.RedriveEnabled = true
		c.Storage.Dir = storage
	}
	cfg, brokers := kafkaConfig(t, tune)
	s := startStack(t, cfg)
	cl := manualProducer(t, brokers)
	const n = 50
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, dlqRecord(fmt.Sprint("k", i), "v"))
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	body := `{"partition":0,"from_offset":0,"dry_run":false}`
	var wg sync.WaitGroup
	results := make([]resp, 3)
	for i := range results {
		wg.Go(func() { results[i] = send(t, "POST", s.uiURL+"/api/v1/debug/dlq/redrive", "", body) })
	}
	wg.Wait()
	redriven := 0
	for _, r := range results {
		switch {
		case r.status == 409:
			if !strings.Contains(r.body, `"error":"redrive_in_progress"`) {
				t.Errorf("409 body = %s, want redrive_in_progress", r.body)
			}
		case r.status == 200:
			sum := lastSummary(t, r.body)
			redriven += int(sum["redriven"].(float64))
			if got := sum["redriven"].(float64) + sum["duplicates"].(float64); got != n {
				t.Errorf("summary = %v, want %d records redriven or skipped", sum, n)
			}
		default:
			t.Errorf("concurrent redrive = %d %s", r.status, r.body)
		}
	}
	if redriven != n {
		t.Fatalf("%d records redriven over 3 concurrent calls, want %d (each once)", redriven, n)
	}
	if got := countSource(t, brokers); got != 30+n {
		t.Fatalf("source topic holds %d records, want %d: each DLQ record once", got, 30+n)
	}
	if sum := lastSummary(t, do(t, "POST", s.uiURL+"/api/v1/debug/dlq/redrive", body).body); sum["duplicates"] != float64(n) || sum["redriven"] != 0.0 {
		t.Errorf("second call = %v, want all %d skipped as duplicates", sum, n)
	}
	// The worker remembers after a restart; "again" redrives anyway.
	s.stop()
	s2 := startStack(t, cfg)
	if sum := lastSummary(t, do(t, "POST", s2.uiURL+"/api/v1/debug/dlq/redrive", body).body); sum["duplicates"] != float64(n) {
		t.Errorf("after a restart = %v, want all %d skipped as duplicates", sum, n)
	}
	again := `{"partition":0,"from_offset":0,"to_offset":0,"dry_run":false,"again":true}`
	if sum := lastSummary(t, do(t, "POST", s2.uiURL+"/api/v1/debug/dlq/redrive", again).body); sum["redriven"] != 1.0 {
		t.Errorf("again = %v, want the record redriven once more", sum)
	}
}

// lastSummary is the summary line of a redrive answer.
func lastSummary(t *testing.T, body string) map[string]any {
	t.Helper()
	ls := strings.Split(strings.TrimSpace(body), "\n")
	var m map[string]map[string]any
	if err := json.Unmarshal([]byte(ls[len(ls)-1]), &m); err != nil || m["summary"] == nil {
		t.Fatalf("no summary line in %s", body)
	}
	return m["summary"]
}

// A DLQ record whose value was cut to fit the DLQ (svc-dlq-truncated) is
// never redriven nor probed: its bytes are not the message.
func TestDLQRedriveSkipsTruncatedRecords(t *testing.T) {
	t.Parallel()
	s, brokers := kafkaStack(t, func(c *config.Config) { c.UI.RedriveEnabled = true })
	cl := manualProducer(t, brokers)
	rec := dlqRecord("big", "cut", kgo.RecordHeader{Key: "svc-dlq-truncated", Value: []byte("2097152")})
	if err := cl.ProduceSync(context.Background(), rec).FirstErr(); err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{`{"partition":0,"from_offset":0}`, `{"partition":0,"from_offset":0,"dry_run":false,"again":true}`} {
		r := do(t, "POST", s.uiURL+"/api/v1/debug/dlq/redrive", body)
		if r.status != 200 || !strings.Contains(r.body, `"outcome":"truncated"`) || !strings.Contains(r.body, "2097152") {
			t.Errorf("redrive %s = %d %s, want the record refused as truncated", body, r.status, r.body)
		}
		if sum := lastSummary(t, r.body); sum["truncated"] != 1.0 || sum["redriven"] != 0.0 {
			t.Errorf("summary = %v, want 1 truncated, 0 redriven", sum)
		}
	}
	if n := countSource(t, brokers); n != 30 {
		t.Errorf("source topic holds %d records, want the 30 it had", n)
	}
}

// TestDLQRedriveSelected: records named one by one are dry-run and
// redriven alone (their neighbours untouched); one the DLQ does not hold
// gets a failed line; a malformed selection is 400 before anything runs.
func TestDLQRedriveSelected(t *testing.T) {
	t.Parallel()
	exe := script(t, `IFS= read -r in; case "$in" in *fail*) echo "still failing" >&2; exit 1;; esac; printf 'ok:%s' "$in"`)
	s, brokers := kafkaStack(t, func(c *config.Config) {
		c.UI.RedriveEnabled = true
		c.Executor.BinaryPath = exe
		c.Handler.MaxAttempts = 1
	})
	cl := manualProducer(t, brokers)
	var recs []*kgo.Record
	for i := range 6 {
		v := "fixed now"
		if i == 3 {
			v = "please fail"
		}
		recs = append(recs, dlqRecord(fmt.Sprint("s", i), v))
	}
	other := dlqRecord("p1", "fixed now")
	other.Partition = 1
	if err := cl.ProduceSync(context.Background(), append(recs, other)...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{`{"records":[]}`, `{"records":[{"partition":0}]}`, `{"records":[{"partition":0,"offset":-1}]}`,
		`{"records":[{"partition":0,"offset":1}],"partition":0}`, `{"records":[{"partition":0,"offset":1}],"from_ts":0}`,
		`{"records":[{"partition":0,"offset":1,"extra":1}]}`} {
		if r := do(t, "POST", s.uiURL+"/api/v1/debug/dlq/redrive", bad); r.status != 400 || !strings.Contains(r.body, `"error":"bad_request"`) {
			t.Errorf("redrive %s = %d %s, want 400", bad, r.status, r.body)
		}
	}
	sel := `"records":[{"partition":0,"offset":1},{"partition":0,"offset":3},{"partition":1,"offset":0},{"partition":0,"offset":99}]`
	r := do(t, "POST", s.uiURL+"/api/v1/debug/dlq/redrive", "{"+sel+"}")
	body := r.body
	for _, want := range []string{`{"partition":0,"offset":1,"outcome":"would_succeed"`, `{"partition":0,"offset":3,"outcome":"would_fail"`,
		`{"partition":1,"offset":0,"outcome":"would_succeed"`, `{"partition":0,"offset":99,"outcome":"failed","error":"the DLQ does not hold this record`} {
		if !strings.Contains(body, want) {
			t.Errorf("dry run of a selection lacks %s:\n%s", want, body)
		}
	}
	if sum := lastSummary(t, body); sum["records"] != 4.0 || sum["would_succeed"] != 2.0 || sum["would_fail"] != 1.0 || sum["failed"] != 1.0 {
		t.Errorf("dry-run summary = %v", sum)
	}
	r = do(t, "POST", s.uiURL+"/api/v1/debug/dlq/redrive", `{"dry_run":false,`+sel+`}`)
	if sum := lastSummary(t, r.body); sum["redriven"] != 3.0 || sum["failed"] != 1.0 {
		t.Fatalf("redrive of a selection = %s, want 3 redriven and 1 failed", r.body)
	}
	got := map[string]bool{}
	for _, rec := range readSource(t, brokers) {
		for _, h := range rec.Headers {
			if h.Key == redrive.HeaderSource {
				got[string(h.Value)] = true
			}
		}
	}
	if len(got) != 3 || !got["0:1"] || !got["0:3"] || !got["1:0"] {
		t.Errorf("redriven DLQ records = %v, want exactly 0:1, 0:3 and 1:0", got)
	}
}

// TestDLQRedriveSkipsAbortedRecords: an exactly-once worker's aborted
// transactions leave DLQ records no read_committed consumer sees (their
// messages were dead-lettered again in a committed transaction); redrive
// reads the DLQ read_committed and never re-sends them.
func TestDLQRedriveSkipsAbortedRecords(t *testing.T) {
	t.Parallel()
	exe := script(t, `IFS= read -r in; printf 'ok:%s' "$in"`)
	s, brokers := kafkaStack(t, func(c *config.Config) {
		c.UI.RedriveEnabled = true
		c.Executor.BinaryPath = exe
	})
	cl := txnProducer(t, brokers)
	commit, abort := kgo.TryCommit, kgo.TryAbort
	txn(t, cl, &commit, "c1")
	txn(t, cl, &abort, "a1", "a2")
	txn(t, cl, &commit, "c2")
	r := do(t, "POST", s.uiURL+"/api/v1/debug/dlq/redrive", `{"partition":0,"from_offset":0,"dry_run":false}`)
	if sum := lastSummary(t, r.body); r.status != 200 || sum["records"] != 2.0 || sum["redriven"] != 2.0 {
		t.Fatalf("redrive = %d %s, want the 2 committed records redriven", r.status, r.body)
	}
	var got []string
	for _, rec := range readSource(t, brokers) {
		for _, h := range rec.Headers {
			if h.Key == redrive.HeaderSource {
				got = append(got, string(rec.Key))
			}
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, []string{"c1", "c2"}) {
		t.Errorf("redriven keys = %v, want [c1 c2] (never the aborted a1, a2)", got)
	}
}
