package demo

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Demo topics.
const (
	TopicIn  = "demo-in"
	TopicOut = "demo-out"
	TopicDLQ = "demo-in_dlq"
)

// Cluster is the demo's embedded Kafka (kfake on loopback).
type Cluster struct {
	c *kfake.Cluster
}

// StartCluster starts a one-broker cluster on a free loopback port with the
// demo topics (3 partitions each).
func StartCluster() (*Cluster, error) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, TopicIn, TopicOut, TopicDLQ))
	if err != nil {
		return nil, fmt.Errorf("start embedded kafka: %w", err)
	}
	return &Cluster{c: c}, nil
}

// Brokers are the cluster's bootstrap addresses.
func (c *Cluster) Brokers() []string { return c.c.ListenAddrs() }

// Close stops the cluster.
func (c *Cluster) Close() { c.c.Close() }

var samples = []string{
	`{"order":%d,"customer":"acme","amount":%d}`,
	`{"order":%d,"customer":"globex","amount":%d}`,
	`{"order":%d,"customer":"initech","amount":%d,"note":"please fail"}`,
	`{"order":%d,"customer":"umbrella","amount":%d}`,
	`{"order":%d,"customer":"hooli","amount":%d,"note":"tempfail"}`,
	`{"order":%d,"customer":"wayne","amount":%d,"currency":"` + FixCurrency + `"}`,
}

// Trickle produces a sample message to the input topic every interval until
// ctx ends; of every six, one fails, one is retried once, and one fails
// until the fix (FixEnv).
func (c *Cluster) Trickle(ctx context.Context, interval time.Duration) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Brokers()...), kgo.DefaultProduceTopic(TopicIn))
	if err != nil {
		return err
	}
	defer cl.Close()
	t := time.NewTicker(interval)
	defer t.Stop()
	for n := 1; ; n++ {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		tmpl := samples[n%len(samples)]
		rec := &kgo.Record{
			Key:     []byte(fmt.Sprintf("customer-%d", n%7)),
			Value:   []byte(fmt.Sprintf(tmpl, n, rand.IntN(1000))),
			Headers: []kgo.RecordHeader{{Key: "svc-label-origin", Value: []byte("demo")}},
		}
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_ = cl.ProduceSync(pctx, rec).FirstErr()
		cancel()
	}
}
