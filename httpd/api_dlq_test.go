package httpd

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"svc/kafkaread/triage"
	"svc/worker/config"
	"svc/worker/workertest/wait"
)

// produceDLQ writes n DLQ records round the 3 partitions of kafkaStack's
// DLQ topic: record i has key k<i>, task id t-<i>, reason "executor exited
// with code <i%3+1>" and timestamp base+i, so record 149 is the newest.
func produceDLQ(t *testing.T, brokers []string, n int) {
	t.Helper()
	cl := manualProducer(t, brokers)
	base := time.Now().Add(-time.Hour).UnixMilli()
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, &kgo.Record{Topic: "orders-raw_dlq", Partition: int32(i % 3), Key: []byte(fmt.Sprint("k", i)),
			Value: []byte(fmt.Sprintf(`{"n":%d}`, i)), Timestamp: time.UnixMilli(base + int64(i)),
			Headers: []kgo.RecordHeader{
				{Key: "svc-task-id", Value: []byte(fmt.Sprint("t-", i))},
				{Key: "svc-dlq-reason", Value: []byte(fmt.Sprintf("executor exited with code %d", i%3+1))},
				{Key: "svc-dlq-attempts", Value: []byte("3")},
				{Key: "svc-dlq-source-partition", Value: []byte(fmt.Sprint(i % 3))},
				{Key: "svc-dlq-source-offset", Value: []byte(fmt.Sprint(i / 3))},
				{Key: "svc-dlq-worker", Value: []byte("w1")},
			}})
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// dlqPage GETs one page of the DLQ triage route.
func dlqPage(t *testing.T, s *stack, query string) triage.Page {
	t.Helper()
	r := do(t, "GET", s.uiURL+"/api/v1/debug/dlq/records?"+query, "")
	var p triage.Page
	if r.status != 200 || json.Unmarshal([]byte(r.body), &p) != nil {
		t.Fatalf("GET dlq/records?%s = %d %s", query, r.status, r.body)
	}
	return p
}

func keys(p triage.Page) []string {
	var out []string
	for _, e := range p.Records {
		out = append(out, *e.Key)
	}
	return out
}

// TestDLQTriage: the DLQ page is newest first; paging older then newer
// walks every record once each way; filters by key, task id and reason
// match what they say; reasons are counted over the records scanned, and
// a scan bound caps what one request reads without skipping a record.
func TestDLQTriage(t *testing.T) {
	t.Parallel()
	s, brokers := kafkaStack(t, nil)
	const n = 150
	produceDLQ(t, brokers, n)

	first := dlqPage(t, s, "limit=50")
	if len(first.Records) != 50 || *first.Records[0].Key != "k149" || *first.Records[49].Key != "k100" {
		t.Fatalf("newest page = %v, want k149 down to k100", keys(first))
	}
	e := first.Records[0]
	if e.TaskID != "t-149" || e.Reason != "executor exited with code 3" || *e.Attempts != 3 || *e.SourcePartition != 2 ||
		*e.SourceOffset != 49 || e.Worker != "w1" || e.Payload != `{"n":149}` || e.Partition != 2 || e.Offset != 49 {
		t.Errorf("newest record = %+v", e)
	}
	if first.Scanned != n || first.Matched != n || first.Total != n || first.Newer != nil || first.Older == nil || len(first.Partitions) != 3 {
		t.Errorf("newest page scanned %d matched %d total %d newer %v older %v partitions %v, want all %d scanned, nothing newer",
			first.Scanned, first.Matched, first.Total, first.Newer, first.Older, first.Partitions, n)
	}
	want := []triage.ReasonCount{{Reason: "executor exited with code 1", Count: 50}, {Reason: "executor exited with code 2", Count: 50}, {Reason: "executor exited with code 3", Count: 50}}
	if fmt.Sprint(first.Reasons) != fmt.Sprint(want) {
		t.Errorf("reasons = %v, want %v", first.Reasons, want)
	}

	// Older pages down to the oldest record, then newer pages back up.
	var seen []string
	pages := []triage.Page{first}
	for p := first; ; {
		seen = append(seen, keys(p)...)
		if p.Older == nil {
			break
		}
		p = dlqPage(t, s, "limit=40&before="+url.QueryEscape(*p.Older))
		pages = append(pages, p)
	}
	if len(seen) != n {
		t.Fatalf("paging older saw %d records, want %d: %v", len(seen), n, seen)
	}
	for i, k := range seen {
		if k != fmt.Sprint("k", n-1-i) {
			t.Fatalf("record %d paging older = %s, want k%d (newest first, none skipped or repeated): %v", i, k, n-1-i, seen)
		}
	}
	last := pages[len(pages)-1]
	back := dlqPage(t, s, "limit=40&after="+url.QueryEscape(*last.Newer))
	if got, want := keys(back), keys(pages[len(pages)-2]); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("newer from the oldest page = %v, want the page before it %v", got, want)
	}
	top := dlqPage(t, s, "limit=50&after="+url.QueryEscape(*dlqPage(t, s, "limit=50&before="+url.QueryEscape(*first.Older)).Newer))
	if fmt.Sprint(keys(top)) != fmt.Sprint(keys(first)) || top.Newer != nil {
		t.Errorf("newer from the second page = %v (newer %v), want the newest page again with nothing newer", keys(top), top.Newer)
	}

	// Filters.
	if p := dlqPage(t, s, "key=k42"); fmt.Sprint(keys(p)) != "[k42]" || p.Scanned != n || p.Matched != 1 {
		t.Errorf("key=k42 = %v (scanned %d, matched %d), want k42 alone out of %d scanned", keys(p), p.Scanned, p.Matched, n)
	}
	if p := dlqPage(t, s, "task_id=t-7"); fmt.Sprint(keys(p)) != "[k7]" {
		t.Errorf("task_id=t-7 = %v, want k7", keys(p))
	}
	p := dlqPage(t, s, "reason="+url.QueryEscape("CODE 2")+"&limit=200")
	if len(p.Records) != 50 || p.Matched != 50 || len(p.Reasons) != 1 || p.Reasons[0].Count != 50 || p.Older != nil {
		t.Errorf("reason=CODE 2 = %d records, matched %d, reasons %v, older %v; want the 50 of code 2, all of them", len(p.Records), p.Matched, p.Reasons, p.Older)
	}
	for _, e := range p.Records {
		if e.Reason != "executor exited with code 2" {
			t.Errorf("reason filter let through %+v", e)
		}
	}
	if p := dlqPage(t, s, "partition=1&limit=3"); fmt.Sprint(keys(p)) != "[k148 k145 k142]" || len(p.Partitions) != 1 {
		t.Errorf("partition=1 = %v, want k148 k145 k142 of partition 1 alone", keys(p))
	}

	// A scan bound: 30 records a request (10 a partition), paging on
	// without a gap.
	p = dlqPage(t, s, "scan=30&limit=50")
	if p.Scanned != 30 || p.ScanLimit != 30 || len(p.Records) != 30 || *p.Records[0].Key != "k149" || *p.Records[29].Key != "k120" {
		t.Fatalf("scan=30 = %v (scanned %d), want the 30 newest", keys(p), p.Scanned)
	}
	if next := dlqPage(t, s, "scan=30&limit=50&before="+url.QueryEscape(*p.Older)); *next.Records[0].Key != "k119" || len(next.Records) != 30 {
		t.Errorf("the page after a bounded scan = %v, want k119 on", keys(next))
	}
	// A filter that matches nothing in the scanned window says so and
	// continues below it.
	if p := dlqPage(t, s, "scan=30&key=k3"); len(p.Records) != 0 || p.Scanned != 30 || p.Older == nil || p.Matched != 0 {
		t.Errorf("scan=30&key=k3 = %v scanned %d older %v, want none found in 30 and a cursor to go on", keys(p), p.Scanned, p.Older)
	}

	for _, bad := range []string{"limit=0", "limit=201", "scan=0", "scan=10001", "before=x", "before=0:1,0:2", "before=0:1&after=0:1",
		"partition=-1", "limit=a", "bogus=1", "limit=1&limit=2"} {
		r := do(t, "GET", s.uiURL+"/api/v1/debug/dlq/records?"+bad, "")
		var body struct{ Error, Detail string }
		if r.status != 400 || json.Unmarshal([]byte(r.body), &body) != nil || body.Error != "bad_request" || body.Detail == "" {
			t.Errorf("dlq/records?%s = %d %s, want 400 bad_request with a detail", bad, r.status, r.body)
		}
	}
	if r := do(t, "GET", s.uiURL+"/api/v1/debug/dlq/records?partition=9", ""); r.status != 404 || !strings.Contains(r.body, `"error":"not_found"`) {
		t.Errorf("unknown partition = %d %s, want 404", r.status, r.body)
	}
	if strings.Contains(do(t, "GET", s.uiURL+"/api/v1/debug/dlq/records", "").body, "orders-raw") {
		t.Error("the DLQ page names the raw topic")
	}
}

// TestDLQTriageWithoutDLQ: an HTTP-only worker without dlq.topic has no
// DLQ to page: 404 naming the key, like the read API.
func TestDLQTriageWithoutDLQ(t *testing.T) {
	t.Parallel()
	s := startStack(t, testConfig(t, "/bin/cat"))
	r := do(t, "GET", s.uiURL+"/api/v1/debug/dlq/records", "")
	if r.status != 404 || !strings.Contains(r.body, "set dlq.topic") {
		t.Errorf("dlq/records without a DLQ = %d %s, want 404 naming dlq.topic", r.status, r.body)
	}
}

// TestDLQSentNamesItsRecord: the dlq_sent event of each dead-lettered
// task carries the DLQ partition and offset its record landed at, and the
// record there carries that task's id.
func TestDLQSentNamesItsRecord(t *testing.T) {
	t.Parallel()
	exe := script(t, `cat >/dev/null; echo "no" >&2; exit 1`)
	s, _ := kafkaStack(t, func(c *config.Config) {
		c.Executor.BinaryPath = exe
		c.Handler.MaxAttempts = 1
	})
	type event struct {
		TaskID  string `json:"task_id"`
		Payload struct {
			Outcome      string `json:"outcome"`
			DLQPartition *int32 `json:"dlq_partition"`
			DLQOffset    *int64 `json:"dlq_offset"`
		} `json:"payload"`
	}
	var events []event
	wait.For(t, wait.Long, "30 dlq_sent events", func() (bool, string) {
		r := do(t, "GET", s.uiURL+"/api/v1/events?types=dlq_sent&limit=100", "")
		var body struct{ Events []event }
		_ = json.Unmarshal([]byte(r.body), &body)
		events = body.Events
		return len(events) == 30, fmt.Sprintf("%d events: %s", len(events), r.body)
	})
	at := map[string]bool{}
	for _, e := range events {
		if e.Payload.Outcome != "sent" || e.Payload.DLQPartition == nil || e.Payload.DLQOffset == nil {
			t.Fatalf("dlq_sent event = %+v, want outcome sent with dlq_partition and dlq_offset", e)
		}
		where := fmt.Sprintf("%d:%d", *e.Payload.DLQPartition, *e.Payload.DLQOffset)
		if at[where] {
			t.Errorf("two events name DLQ record %s", where)
		}
		at[where] = true
		r := do(t, "GET", fmt.Sprintf("%s/api/v1/debug/kafka/dlq/message?partition=%d&offset=%d", s.uiURL, *e.Payload.DLQPartition, *e.Payload.DLQOffset), "")
		if r.status != 200 || !strings.Contains(r.body, `{"key":"svc-task-id","value":"`+e.TaskID+`"`) {
			t.Errorf("DLQ record %s of task %s = %d %s, want it to carry svc-task-id %s", where, e.TaskID, r.status, r.body, e.TaskID)
		}
	}
}
