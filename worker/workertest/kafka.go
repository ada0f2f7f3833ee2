package workertest

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Cluster starts a one-broker kfake cluster seeded with topics, closed when
// the test ends; group sessions may be as short as 500ms.
func Cluster(t testing.TB, partitions int32, topics []string, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	base := []kfake.Opt{kfake.NumBrokers(1), kfake.GroupMinSessionTimeout(500 * time.Millisecond)}
	if len(topics) > 0 {
		base = append(base, kfake.SeedTopics(partitions, topics...))
	}
	c, err := kfake.NewCluster(append(base, opts...)...)
	if err != nil {
		t.Fatalf("kfake.NewCluster: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// RefuseProduce is a kfake answer refusing every partition of req with code.
func RefuseProduce(req *kmsg.ProduceRequest, code int16) *kmsg.ProduceResponse {
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewProduceResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		for _, rp := range rt.Partitions {
			sp := kmsg.NewProduceResponseTopicPartition()
			sp.Partition, sp.ErrorCode = rp.Partition, code
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

// HangProduce makes c swallow every produce request; the count says how
// many.
func HangProduce(c *kfake.Cluster) *atomic.Int32 {
	var held atomic.Int32
	c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		held.Add(1)
		return nil, nil, true
	})
	return &held
}
