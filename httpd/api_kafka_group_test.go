package httpd

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"svc/worker/config"
	"svc/worker/kafka"
	"svc/worker/workertest"
	"svc/worker/workertest/wait"
)

// TestKafkaGroupRouteGates: without a running Kafka consumer the group
// view answers 503; with ui.kafka_read_enabled false, 403 naming the key.
func TestKafkaGroupRouteGates(t *testing.T) {
	t.Parallel()
	cfg, _ := kafkaConfig(t, nil)
	s, b := buildStack(t, cfg, BuildOptions{}) // built, not run: no consumer runs
	t.Cleanup(b.Close)
	srv := httptest.NewServer(s.ui.handler())
	t.Cleanup(srv.Close)
	if r := do(t, "GET", srv.URL+"/api/v1/debug/kafka/group", ""); r.status != 503 || !strings.Contains(r.body, `"error":"consumer_not_running"`) {
		t.Errorf("GET group without a consumer = %d %s, want 503 consumer_not_running", r.status, r.body)
	}
	off, _ := kafkaStack(t, func(c *config.Config) { c.UI.KafkaReadEnabled = false })
	if r := do(t, "GET", off.uiURL+"/api/v1/debug/kafka/group", ""); r.status != 403 || !strings.Contains(r.body, "ui.kafka_read_enabled") {
		t.Errorf("GET group with the Kafka read API off = %d %s, want 403 naming ui.kafka_read_enabled", r.status, r.body)
	}
}

// TestKafkaGroupRoute serves the group view of a running consumer behind
// the token: offsets, lag and owner per assigned partition; 502 without
// broker addresses or topic names once the brokers are gone; 503 once the
// consumer stopped.
func TestKafkaGroupRoute(t *testing.T) {
	t.Parallel()
	c := workertest.Cluster(t, 2, []string{"orders-raw", "orders-out"})
	brokers := c.ListenAddrs()
	cfg := testConfig(t, "/bin/cat")
	cfg.Sources.HTTP.Enabled = false
	cfg.UI.AuthToken = "tok-0123456789abcdef"
	k := &cfg.Sources.Kafka
	k.Enabled, k.Brokers, k.Topic, k.Group = true, brokers, "orders-raw", workertest.UniqueName("g")
	k.StartupAlignEnabled = false
	k.CommitInterval = config.Duration(100 * time.Millisecond)
	cfg.Sinks.Kafka = []config.KafkaSink{{Name: "results", Topic: "orders-out"}}
	// The built worker's UI server, also served on a test socket that
	// outlives the worker, to ask it before the worker runs and after it
	// stopped.
	s, b := buildStack(t, cfg, BuildOptions{})
	srv := httptest.NewServer(s.ui.handler())
	t.Cleanup(srv.Close)
	url, auth := srv.URL+"/api/v1/debug/kafka/group", []string{"Authorization", "Bearer tok-0123456789abcdef"}
	noLeak := func(body string) {
		t.Helper()
		for _, secret := range append([]string{"orders-raw", "orders-out"}, brokers...) {
			if strings.Contains(body, secret) {
				t.Errorf("group view leaks %q: %s", secret, body)
			}
		}
	}

	if r := do(t, "GET", url, "", auth...); r.status != 503 {
		t.Errorf("GET group before the consumer runs = %d %s, want 503", r.status, r.body)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	stop := func() {
		cancel()
		select {
		case <-done:
		case <-time.After(wait.Long):
			t.Errorf("the Kafka source did not stop within %s", wait.Long)
		}
	}
	t.Cleanup(func() {
		if ctx.Err() == nil {
			stop()
		}
	})

	prod := manualProducer(t, brokers)
	for i := range 5 {
		if err := prod.ProduceSync(t.Context(), &kgo.Record{Topic: "orders-raw", Partition: 0, Value: fmt.Appendf(nil, "m%d", i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	var g kafka.GroupState
	wait.For(t, wait.Long, "the group view shows partition 0 committed to its end", func() (bool, string) {
		r := do(t, "GET", url, "", auth...)
		g = kafka.GroupState{}
		if r.status != 200 || json.Unmarshal([]byte(r.body), &g) != nil || len(g.Partitions) != 2 {
			return false, fmt.Sprintf("%d %s", r.status, r.body)
		}
		p0 := g.Partitions[0]
		return p0.CommittedOffset != nil && *p0.CommittedOffset == 5 && p0.Lag != nil && *p0.Lag == 0, r.body
	})
	if g.Group != k.Group || g.Protocol != "cooperative-sticky" || g.Alias != "source" || g.Owner.MemberID == "" || g.Owner.Worker != cfg.Worker.Name {
		t.Errorf("group view = %+v, want group %s, cooperative-sticky, alias source, this worker's member id", g, k.Group)
	}
	if p1 := g.Partitions[1]; p1.Partition != 1 || p1.HighWatermark == nil || *p1.HighWatermark != 0 || p1.Lag == nil || *p1.Lag != 0 || p1.CommittedOffset != nil {
		t.Errorf("empty partition 1 = %+v, want high watermark 0, lag 0, no committed offset", p1)
	}
	if len(g.GroupPartitions) != 2 || g.TotalLag == nil || *g.TotalLag != 0 || !g.GroupPartitions[0].Mine || g.GroupPartitions[0].Owner == nil ||
		g.GroupPartitions[0].Owner.Worker != cfg.Worker.Name || g.GroupPartitions[0].Paused == nil {
		t.Errorf("group_partitions = %+v, total_lag %v; want both partitions, this worker's, total lag 0", g.GroupPartitions, g.TotalLag)
	}
	r := do(t, "GET", url, "", auth...)
	noLeak(r.body)
	if r := do(t, "GET", url, ""); r.status != 401 {
		t.Errorf("GET group without the token = %d, want 401", r.status)
	}

	c.Close()
	r = do(t, "GET", url, "", auth...)
	if r.status != 502 || !strings.Contains(r.body, `"error":"broker_unavailable"`) {
		t.Errorf("GET group with the brokers gone = %d %s, want 502 broker_unavailable", r.status, r.body)
	}
	noLeak(r.body)
	stop()
	if r := do(t, "GET", url, "", auth...); r.status != 503 {
		t.Errorf("GET group after the consumer stopped = %d %s, want 503", r.status, r.body)
	}
}
