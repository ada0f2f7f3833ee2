package httpd

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"svc/kafkaread"
)

// txnProducer is a transactional client producing to the partition each
// record names, closed when the test ends.
func txnProducer(t *testing.T, brokers []string) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.TransactionalID("svc-isolation-test"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// txn writes one record per key to partition 0 of kafkaStack's DLQ topic
// in one transaction, and ends it with end (kgo.TryCommit, kgo.TryAbort),
// or leaves it open when end is nil.
func txn(t *testing.T, cl *kgo.Client, end *kgo.TransactionEndTry, keys ...string) {
	t.Helper()
	ctx := context.Background()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatalf("BeginTransaction: %v", err)
	}
	var recs []*kgo.Record
	for _, k := range keys {
		recs = append(recs, &kgo.Record{Topic: "orders-raw_dlq", Partition: 0, Key: []byte(k), Value: []byte("v-" + k)})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce %v: %v", keys, err)
	}
	if end != nil {
		if err := cl.EndTransaction(ctx, *end); err != nil {
			t.Fatalf("EndTransaction(%v) of %v: %v", *end, keys, err)
		}
	}
}

// streamKeys reads the DLQ through /messages and returns the keys in order.
func streamKeys(t *testing.T, s *stack, query string) []string {
	t.Helper()
	r := do(t, "GET", s.uiURL+"/api/v1/debug/kafka/dlq/messages?from_ts=0"+query, "")
	if r.status != 200 {
		t.Fatalf("GET dlq/messages?from_ts=0%s = %d %s", query, r.status, r.body)
	}
	var out []string
	for line := range strings.Lines(r.body) {
		var rec struct {
			Key   string `json:"key"`
			Error string `json:"error"`
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil || rec.Error != "" {
			t.Fatalf("GET dlq/messages?from_ts=0%s: line %q (%v)", query, line, err)
		}
		out = append(out, rec.Key)
	}
	return out
}

// TestKafkaReadIsolation: the Kafka read routes and the DLQ triage page
// show what a read_committed consumer sees with isolation=read_committed
// (no records of aborted transactions; nothing of an open transaction,
// the read ending at the last stable offset, until it commits) and every
// record without it, on one server, each request with its own view.
//
// Partition 0 of the DLQ holds c1..c3 at offsets 0-2 and their commit
// marker at 3, a1..a3 at 4-6 and their abort marker at 7, then o1 at 8.
func TestKafkaReadIsolation(t *testing.T) {
	t.Parallel()
	s, brokers := kafkaStack(t, nil)
	cl := txnProducer(t, brokers)
	commit, abort := kgo.TryCommit, kgo.TryAbort
	txn(t, cl, &commit, "c1", "c2", "c3")
	txn(t, cl, &abort, "a1", "a2", "a3")

	const committed = "&isolation=read_committed"
	check := func(t *testing.T, wantAll, wantCommitted []string, high, lso int64) {
		t.Helper()
		for _, c := range []struct {
			query string
			want  []string
			high  int64
			iso   kafkaread.Isolation
		}{
			{"", wantAll, high, kafkaread.ReadUncommitted},
			{"&isolation=read_uncommitted", wantAll, high, kafkaread.ReadUncommitted},
			{committed, wantCommitted, lso, kafkaread.ReadCommitted},
		} {
			if got := streamKeys(t, s, c.query); !slices.Equal(got, c.want) {
				t.Errorf("dlq/messages?from_ts=0%s keys = %v, want %v", c.query, got, c.want)
			}
			p := dlqPage(t, s, "limit=50"+c.query)
			newest := slices.Clone(c.want)
			slices.Reverse(newest)
			if got := keys(p); !slices.Equal(got, newest) {
				t.Errorf("dlq/records?limit=50%s keys = %v, want %v", c.query, got, newest)
			}
			if p.Isolation != c.iso || p.Partitions[0].High != c.high || p.Total != c.high {
				t.Errorf("dlq/records?limit=50%s isolation, partition 0 high, total = %v, %d, %d, want %v, %d, %d",
					c.query, p.Isolation, p.Partitions[0].High, p.Total, c.iso, c.high, c.high)
			}
		}
	}
	message := func(t *testing.T, offset, query string, status int, want string) {
		t.Helper()
		r := do(t, "GET", s.uiURL+"/api/v1/debug/kafka/dlq/message?partition=0&offset="+offset+query, "")
		var got struct {
			Key    string `json:"key"`
			Error  string `json:"error"`
			Detail string `json:"detail"`
		}
		_ = json.Unmarshal([]byte(r.body), &got)
		if r.status != status || (status == 200 && got.Key != want) || (status != 200 && (got.Error != "not_found" || !strings.Contains(got.Detail, want))) {
			t.Errorf("dlq/message offset %s%s = %d %s, want %d %q", offset, query, r.status, r.body, status, want)
		}
	}

	t.Run("committed and aborted", func(t *testing.T) {
		// kfake hands a read_uncommitted fetch the aborted batch as it
		// does any other; only a read_committed client drops it.
		check(t, []string{"c1", "c2", "c3", "a1", "a2", "a3"}, []string{"c1", "c2", "c3"}, 8, 8)
		message(t, "4", "", 200, "a1")
		message(t, "4", committed, 404, "offset 4 in partition 0 is not shown under read_committed (a record of an aborted transaction, a transaction marker, or deleted or compacted); the next offset shown is 8")
		message(t, "2", committed, 200, "c3")
	})
	t.Run("open transaction", func(t *testing.T) {
		txn(t, cl, nil, "o1")
		check(t, []string{"c1", "c2", "c3", "a1", "a2", "a3", "o1"}, []string{"c1", "c2", "c3"}, 9, 8)
		message(t, "8", "", 200, "o1")
		message(t, "8", committed, 404, "offset 8 is outside partition 0's range [0, 8) (read_committed reads end at the last stable offset, before any open transaction)")
	})
	t.Run("open transaction committed", func(t *testing.T) {
		if err := cl.EndTransaction(context.Background(), kgo.TryCommit); err != nil {
			t.Fatalf("EndTransaction(commit) of o1: %v", err)
		}
		check(t, []string{"c1", "c2", "c3", "a1", "a2", "a3", "o1"}, []string{"c1", "c2", "c3", "o1"}, 10, 10)
		message(t, "8", committed, 200, "o1")
	})
}

// TestKafkaReadIsolationBadValue: any isolation but read_uncommitted and
// read_committed, or one given twice, is a 400 bad_request naming the
// parameter and its values on every route that takes it.
func TestKafkaReadIsolationBadValue(t *testing.T) {
	t.Parallel()
	s, _ := kafkaStack(t, nil)
	for _, path := range []string{
		"/api/v1/debug/kafka/source/message?partition=0&offset=0",
		"/api/v1/debug/kafka/source/messages?from_ts=0",
		"/api/v1/debug/kafka/dlq/messages?from_ts=0",
		"/api/v1/debug/dlq/records?limit=5",
	} {
		for _, c := range []struct{ query, detail string }{
			{"&isolation=read_commited", `isolation must be read_uncommitted (the default) or read_committed, not "read_commited"`},
			{"&isolation=READ_COMMITTED", `isolation must be read_uncommitted (the default) or read_committed, not "READ_COMMITTED"`},
			{"&isolation=read_committed&isolation=read_uncommitted", "isolation is given 2 times"},
		} {
			r := do(t, "GET", s.uiURL+path+c.query, "")
			var e ErrorBody
			if err := json.Unmarshal([]byte(r.body), &e); err != nil || r.status != 400 || e.Error != "bad_request" || e.Detail != c.detail {
				t.Errorf("GET %s%s = %d %s, want 400 bad_request %q", path, c.query, r.status, r.body, c.detail)
			}
		}
	}
}
