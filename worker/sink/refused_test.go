package sink

import (
	"context"
	"crypto/rand"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"svc/worker/config"
	"svc/worker/model"
	"svc/worker/workertest"
	"svc/worker/workertest/wait"
)

// randomResult is an ok HTTP task result whose output is n random bytes:
// no codec shrinks its batches below what the broker refuses.
func randomResult(id string, n int) *model.TaskResult {
	res := okResult(id, 0)
	res.Output = make([]byte, n)
	_, _ = rand.Read(res.Output)
	return res
}

// setTopicLimit sets topic's max.message.bytes on c, as an operator does
// at runtime.
func setTopicLimit(t *testing.T, c *kfake.Cluster, topic string, n int) {
	t.Helper()
	v := fmt.Sprint(n)
	rs, err := kadm.NewClient(workertestClient(t, c)).AlterTopicConfigs(t.Context(), []kadm.AlterConfig{{Name: "max.message.bytes", Value: &v}}, topic)
	if err == nil {
		_, err = rs.On(topic, nil)
	}
	if err != nil {
		t.Fatalf("set %s max.message.bytes = %d: %v", topic, n, err)
	}
}

// readAll is every record on partition 0 of topic as a read_committed
// consumer sees it: a record produced after the test's own marks the end.
func readAll(t *testing.T, c *kfake.Cluster, topic string) []*kgo.Record {
	t.Helper()
	end := &kgo.Record{Topic: topic, Headers: []kgo.RecordHeader{{Key: "test-end"}}}
	if err := workertestClient(t, c).ProduceSync(t.Context(), end).FirstErr(); err != nil {
		t.Fatalf("produce the end mark to %s: %v", topic, err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.FetchMaxWait(100*time.Millisecond), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(t.Context(), wait.Long)
	defer cancel()
	var out []*kgo.Record
	for {
		f := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %s: no end mark after %d records", topic, len(out))
		}
		for _, r := range f.Records() {
			if len(r.Headers) == 1 && r.Headers[0].Key == "test-end" {
				return out
			}
			out = append(out, r)
		}
	}
}

// taskIDs are the svc-task-id headers of recs, or of the DLQ records'
// tasks; with the DLQ reasons of those whose task id starts with "small".
func taskIDs(recs []*kgo.Record) (ids map[string]int, smallReasons []string) {
	ids = map[string]int{}
	for _, r := range recs {
		id := header(r, HeaderTaskID)
		ids[id]++
		if strings.HasPrefix(id, "small") && header(r, HeaderDLQReason) != "" {
			smallReasons = append(smallReasons, header(r, HeaderDLQReason))
		}
	}
	return ids, smallReasons
}

// mix is small results of about 190 bytes (RecordSize) and large ones of
// bigBytes, interleaved: small-0, small-1, big-0, small-2, ...
func mix(small, big, bigBytes int) []*model.TaskResult {
	var out []*model.TaskResult
	for i, j := 0, 0; i < small || j < big; {
		if i < small {
			out = append(out, randomResult(fmt.Sprintf("small-%d", i), 100))
			i++
		}
		if i%2 == 0 && j < big {
			out = append(out, randomResult(fmt.Sprintf("big-%d", j), bigBytes))
			j++
		}
	}
	return out
}

// deliverAll delivers results at once, all under way together (so the
// producer batches small results with large ones), by Deliver or by
// DeliverAsync, and fails the test on an error.
func deliverAll(t *testing.T, ss *Set, async bool, results []*model.TaskResult) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, len(results))
	for _, res := range results {
		if async {
			wg.Add(1)
			ss.DeliverAsync(t.Context(), res, func(err error) { errs <- err; wg.Done() })
			continue
		}
		wg.Go(func() { errs <- ss.Deliver(t.Context(), res) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("delivery = %v, want nil (delivered, or its message in the DLQ)", err)
		}
	}
}

// TestRefusedBatchSmallResultsDelivered: a broker that refuses a batch as
// too large refuses every record in it; a small result that shared the
// batch with one over the topic's limit is delivered all the same, and
// only results over the limit go to the DLQ. The sink learns the topic's
// limit from the refusal without a restart: lowered at runtime, or lower
// than a configured max_message_bytes. With Deliver and DeliverAsync.
func TestRefusedBatchSmallResultsDelivered(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		fixed       int // sinks.kafka[].max_message_bytes; 0: ask the brokers
		topicLimit  int // set at runtime, after the first delivery; 0: the brokers' default
		bigBytes    int
		wantLimit   int
		deniedDescr bool // the worker may not describe configs
	}{
		{name: "topic limit lowered at runtime", topicLimit: 5000, bigBytes: 6000, wantLimit: 5000},
		{name: "max_message_bytes above the broker's", fixed: config.MaxMessageBytesMax, bigBytes: 1100 << 10, wantLimit: DefaultMaxMessageBytes},
		{name: "limit lowered, brokers not describing it", topicLimit: 5000, bigBytes: 6000, deniedDescr: true},
	} {
		for _, async := range []bool{false, true} {
			mode := "Deliver"
			if async {
				mode = "DeliverAsync"
			}
			t.Run(tc.name+"/"+mode, func(t *testing.T) {
				t.Parallel()
				c := workertest.Cluster(t, 1, []string{"out", "dlq"})
				if tc.deniedDescr {
					denyDescribeConfigs(c)
				}
				logs := &workertest.Logs{}
				ss := limitTestSet(t, c, logs, func(cfg *config.Config) {
					cfg.Sinks.Kafka[0].MaxMessageBytes = tc.fixed
					cfg.Sinks.Kafka[0].ClientConfig = map[string]string{"metadata.max.age.ms": "500", "linger.ms": "20"}
				})
				s := ss.byName["out"]
				deliverAll(t, ss, async, []*model.TaskResult{randomResult("first", 100)}) // the limit is resolved
				if tc.topicLimit > 0 {
					setTopicLimit(t, c, "out", tc.topicLimit)
				}

				const small, big = 20, 10
				deliverAll(t, ss, async, mix(small, big, tc.bigBytes))

				out, _ := taskIDs(readAll(t, c, "out"))
				dlqRecs := readAll(t, c, "dlq")
				dlq, smallReasons := taskIDs(dlqRecs)
				if len(smallReasons) > 0 {
					t.Errorf("%d small results in the DLQ, want 0; reasons: %q", len(smallReasons), smallReasons)
				}
				for i := range small {
					if id := fmt.Sprintf("small-%d", i); out[id] != 1 {
						t.Errorf("small result %s on the sink %d times, want 1", id, out[id])
					}
				}
				for i := range big {
					if id := fmt.Sprintf("big-%d", i); dlq[id] != 1 || out[id] != 0 {
						t.Errorf("large result %s: %d times in the DLQ, %d on the sink; want 1 and 0", id, dlq[id], out[id])
					}
				}
				for _, r := range dlqRecs {
					if reason := header(r, HeaderDLQReason); !strings.HasPrefix(reason, "result too large for sink out: ") {
						t.Errorf("DLQ reason %q, want result too large for sink out", reason)
					}
				}
				if tc.wantLimit > 0 {
					if got := s.limit.get(); got != tc.wantLimit {
						t.Errorf("the sink's limit after the refusal = %d, want the topic's %d", got, tc.wantLimit)
					}
					learned := false
					for _, l := range logs.Named("kafka_max_message_bytes") {
						learned = learned || (l["target"] == "sink out" && l["max_message_bytes"] == float64(tc.wantLimit) && l["previous"] != nil)
					}
					if !learned {
						t.Errorf("no kafka_max_message_bytes log of the new limit %d: %s", tc.wantLimit, logs.String())
					}
				} else if got, size := s.limit.get(), RecordSize(resultRecord("out", ss.name, false, randomResult("big-0", tc.bigBytes))); got >= size {
					t.Errorf("the sink's limit after large results were refused alone = %d, want below their %d bytes", got, size)
				}
				if st := s.breaker.State(); st != Closed {
					t.Errorf("breaker %s, want closed: refusals for size are no sink failure", st)
				}

				// Learned: a second mix, with more small results than one
				// batch of the new limit holds, is judged and batched
				// within it: no broker refuses anything.
				retries := testutil.ToFloat64(ss.m.refusedRetries.WithLabelValues("out"))
				deliverAll(t, ss, async, mix(5*small, big, tc.bigBytes))
				if n := testutil.ToFloat64(ss.m.refusedRetries.WithLabelValues("out")); n != retries {
					t.Errorf("svc_sink_refused_retries_total went from %v to %v in the second mix, want no refusal", retries, n)
				}
			})
		}
	}
}

// denyDescribeConfigs makes c refuse every DescribeConfigs (a worker
// without the permission).
func denyDescribeConfigs(c *kfake.Cluster) {
	c.ControlKey(int16(kmsg.DescribeConfigs), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		r := req.(*kmsg.DescribeConfigsRequest)
		resp := r.ResponseKind().(*kmsg.DescribeConfigsResponse)
		for _, rr := range r.Resources {
			res := kmsg.NewDescribeConfigsResponseResource()
			res.ResourceName, res.ResourceType = rr.ResourceName, rr.ResourceType
			res.ErrorCode = kerr.TopicAuthorizationFailed.Code
			if rr.ResourceType == kmsg.ConfigResourceTypeBroker {
				res.ErrorCode = kerr.ClusterAuthorizationFailed.Code
			}
			resp.Resources = append(resp.Resources, res)
		}
		return resp, nil, true
	})
}

// TestRaisedLimitLearned: a result over the sink's limit is checked
// against the topic's limit as the brokers tell it now (once the known
// one is older than limitMaxAge) before it goes to the DLQ: a raised
// max.message.bytes is learned without a restart.
func TestRaisedLimitLearned(t *testing.T) {
	t.Parallel()
	c := workertest.Cluster(t, 1, []string{"out", "dlq"})
	setTopicLimit(t, c, "out", 5000)
	logs := &workertest.Logs{}
	ss := limitTestSet(t, c, logs, nil)
	if err := ss.Deliver(t.Context(), randomResult("before", 6000)); err != nil {
		t.Fatalf("Deliver(6000 bytes) = %v", err)
	}
	setTopicLimit(t, c, "out", 65536)
	time.Sleep(limitMaxAge) // the known limit is now too old to send a record to the DLQ on
	if err := ss.Deliver(t.Context(), randomResult("after", 6000)); err != nil {
		t.Fatalf("Deliver(6000 bytes) = %v", err)
	}
	out, _ := taskIDs(readAll(t, c, "out"))
	dlq, _ := taskIDs(readAll(t, c, "dlq"))
	if dlq["before"] != 1 || out["after"] != 1 || dlq["after"] != 0 {
		t.Errorf("sink %v, DLQ %v; want before in the DLQ (limit 5000), after on the sink (limit raised to 65536)", out, dlq)
	}
	if got := ss.byName["out"].limit.get(); got != 65536 {
		t.Errorf("the sink's limit = %d, want 65536", got)
	}
}

// TestStagedRefusedBatch: exactly-once. A transaction whose batch a
// broker refuses as too large aborts; the results, staged again, go out
// with the topic's limit as the brokers tell it after the refusal: every
// small result commits to the sink and only those over the limit go to
// the DLQ. Brokers that do not tell the limit have it halved after each
// refusal until the batches fit. The transaction is run as the Kafka
// source runs it (one transactional client with the set's
// TransactionOpts, Failed before the abort, the messages staged again).
func TestStagedRefusedBatch(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		deniedDescr bool
		maxAborts   int // transactions refused before one commits
	}{
		{name: "limit learned", maxAborts: 1},
		{name: "brokers not describing it", deniedDescr: true, maxAborts: 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := workertest.Cluster(t, 1, []string{"out", "dlq"})
			logs := &workertest.Logs{}
			ss := limitTestSet(t, c, logs, nil)
			// session is the source's transactional client; Failed asking
			// to renew it is a new session, a new client.
			var session *kgo.Client
			newSession := func() {
				if session != nil {
					session.Close()
				}
				var err error
				session, err = kgo.NewClient(append(ss.TransactionOpts(), kgo.SeedBrokers(c.ListenAddrs()...), kgo.TransactionalID("svc-test"), kgo.ProducerLinger(20*time.Millisecond))...)
				if err != nil {
					t.Fatal(err)
				}
			}
			newSession()
			defer func() { session.Close() }()
			if n, _ := stagedTransaction(t, ss, session, []*model.TaskResult{randomResult("first", 100)}); n != 0 {
				t.Fatalf("first transaction: %d records refused", n)
			}
			if tc.deniedDescr {
				denyDescribeConfigs(c)
			}
			setTopicLimit(t, c, "out", 5000)
			const small, big = 60, 10 // the small ones: about 13 KB, several batches of the new limit
			results := mix(small, big, 6000)
			aborts := 0
			for { // the source's retries after an abort
				n, renew := stagedTransaction(t, ss, session, results)
				if n == 0 {
					break
				}
				if aborts++; aborts > tc.maxAborts {
					t.Fatalf("%d transactions aborted for records refused as too large, want %d at most", aborts, tc.maxAborts)
				}
				if renew {
					newSession()
				}
			}
			if aborts == 0 {
				t.Fatal("no record refused in a transaction of results over the topic's new limit")
			}

			out, _ := taskIDs(readAll(t, c, "out"))
			dlq, smallReasons := taskIDs(readAll(t, c, "dlq"))
			if len(smallReasons) > 0 {
				t.Errorf("%d small results in the DLQ, want 0; reasons: %q", len(smallReasons), smallReasons)
			}
			for i := range small {
				if id := fmt.Sprintf("small-%d", i); out[id] != 1 {
					t.Errorf("small result %s committed to the sink %d times, want 1", id, out[id])
				}
			}
			for i := range big {
				if id := fmt.Sprintf("big-%d", i); dlq[id] != 1 || out[id] != 0 {
					t.Errorf("large result %s: %d times in the DLQ, %d on the sink; want 1 and 0", id, dlq[id], out[id])
				}
			}
			if got := ss.byName["out"].limit.get(); !tc.deniedDescr && got != 5000 {
				t.Errorf("the sink's limit after the refusal = %d, want the topic's 5000", got)
			}
		})
	}
}

// stagedTransaction stages results and produces them in one transaction
// on cl, as the Kafka source does: Failed and an abort when a record is
// refused, else a commit and Committed. It returns the refused records'
// count and Failed's answer.
func stagedTransaction(t *testing.T, ss *Set, cl *kgo.Client, results []*model.TaskResult) (refused int, renew bool) {
	t.Helper()
	var sts []*Staged
	for _, res := range results {
		st, err := ss.Stage(t.Context(), res)
		if err != nil {
			t.Fatalf("Stage(%s) = %v", res.Task.ID, err)
		}
		sts = append(sts, st)
	}
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var fails []Failure
	for _, st := range sts {
		for i, rec := range st.Records {
			cl.Produce(t.Context(), rec, func(_ *kgo.Record, err error) {
				if err != nil {
					mu.Lock()
					fails = append(fails, Failure{St: st, I: i, Err: err})
					mu.Unlock()
				}
			})
		}
	}
	if err := cl.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	end := kgo.TryCommit
	if len(fails) > 0 {
		renew = ss.Failed(fails)
		end = kgo.TryAbort
	}
	if err := cl.EndTransaction(t.Context(), end); err != nil {
		t.Fatalf("EndTransaction(%v) = %v", end, err)
	}
	if end == kgo.TryCommit {
		for _, st := range sts {
			ss.Committed(st)
		}
	}
	return len(fails), renew
}
