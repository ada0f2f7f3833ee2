package kafkaread

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	"svc/worker/kconn"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// bigTopic fills topicBig on c with n records in batches of 10, so that a
// client with a tiny fetch.max.bytes needs many fetches to read it.
func bigTopic(t *testing.T, c *kfake.Cluster, n int) {
	t.Helper()
	pr := newProducer(t, c.ListenAddrs())
	for i := 0; i < n; i += 10 {
		var recs []*kgo.Record
		for j := i; j < min(i+10, n); j++ {
			recs = append(recs, rec(0, int64(1000+j), "", "payload"))
		}
		produce(t, pr, topicBig, recs...)
	}
}

// slowConn reads c one small fetch at a time.
func slowConn(c *kfake.Cluster) kconn.Conn {
	return kconn.Conn{Brokers: c.ListenAddrs(), ClientConfig: map[string]string{"fetch.max.bytes": "1"}}
}

func TestStreamCancelLeavesNothing(t *testing.T) {
	t.Parallel()
	c := newCluster(t, kfake.SeedTopics(1, topicBig))
	bigTopic(t, c, 500)
	r, err := New([]AliasSpec{{Name: "source", Kind: KindSource, Topic: topicBig, Conn: slowConn(c)}})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	before := runtime.NumGoroutine()

	ctx, cancel := context.WithCancel(t.Context())
	n := 0
	err = r.Stream(ctx, "source", StreamQuery{}, func(Record) error {
		if n++; n == 20 {
			cancel() // the HTTP client disconnects mid-stream
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) || n >= 500 {
		t.Fatalf("Stream(canceled) = %v after %d records, want context.Canceled before the end", err, n)
	}
	if after := settleGoroutines(before); after > before {
		buf := make([]byte, 1<<16)
		t.Errorf("goroutines: %d before Stream, %d after cancel\n%s", before, after, buf[:runtime.Stack(buf, true)])
	}

	// Reads join no group and commit nothing.
	adm := kadm.NewClient(newProducer(t, c.ListenAddrs()))
	offsets, err := adm.FetchOffsets(t.Context(), ReaderClientID)
	if err != nil && !errors.Is(err, kerr.GroupIDNotFound) {
		t.Fatalf("FetchOffsets(%s): %v", ReaderClientID, err)
	}
	if len(offsets) != 0 {
		t.Errorf("FetchOffsets(%s) = %v, want no committed offset", ReaderClientID, offsets)
	}
	groups, err := adm.ListGroups(t.Context())
	if err != nil {
		t.Fatalf("ListGroups: %v", err)
	}
	if len(groups) != 0 {
		t.Errorf("ListGroups() = %v, want no group", groups.Groups())
	}
}

func TestStreamBrokerFailureMidStream(t *testing.T) {
	t.Parallel()
	c := newCluster(t, kfake.SeedTopics(1, topicBig))
	const total = 2000
	bigTopic(t, c, total)
	addrs := c.ListenAddrs() // kfake's ListenAddrs blocks once the cluster is closed
	const deadline = time.Second
	r, err := New([]AliasSpec{{Name: "source", Kind: KindSource, Topic: topicBig, Conn: slowConn(c)}}, WithDeadline(deadline))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	var once sync.Once
	n := 0
	start := time.Now()
	err = r.Stream(t.Context(), "source", StreamQuery{}, func(Record) error {
		if n++; n == 20 {
			once.Do(c.Close) // every broker goes away mid-stream
		}
		time.Sleep(time.Millisecond)
		return nil
	})
	t.Logf("Stream(brokers closed) after %d records in %v: %v", n, time.Since(start), err)
	if !isBrokerError(err) {
		t.Fatalf("Stream(brokers closed) = %v after %d records, want a broker error", err, n)
	}
	if n < 20 || n >= total {
		t.Errorf("Stream(brokers closed) emitted %d records, want some but not all %d", n, total)
	}
	if elapsed := time.Since(start); elapsed > 3*deadline+2*time.Second {
		t.Errorf("Stream(brokers closed) took %v, want about the %v deadline", elapsed, deadline)
	}
	assertNoLeak(t, err, addrs)
}
