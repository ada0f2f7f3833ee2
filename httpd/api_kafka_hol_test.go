package httpd

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"svc/worker/config"
	"svc/worker/workertest"
	"svc/worker/workertest/wait"
)

// TestKafkaGroupFleetHeadOfLine runs two workers of one consumer group on
// a 2-partition topic, sharing a folder and trusting each other, with an
// executor that fails every first attempt and holds every second one.
// Each partition gets three messages of one key. Alpha's group view names
// the key holding its own partition with its task at attempt 2 (the
// running tasks joined by task id); with scope fleet it also names the key
// holding beta's partition, as beta answered its head-of-line route
// (attempt 2, 2 behind), and lists beta with its URL; with scope local
// beta's partition has none.
func TestKafkaGroupFleetHeadOfLine(t *testing.T) {
	t.Parallel()
	c := workertest.Cluster(t, 2, []string{"orders-raw", "orders-out"})
	brokers := c.ListenAddrs()
	shared := t.TempDir()
	mark := filepath.Join(t.TempDir(), "go")
	exe := script(t, fmt.Sprintf(`[ "$SVC_ATTEMPT" = 1 ] && { cat >/dev/null; exit 1; }
while [ ! -e %q ]; do sleep 0.02; done
cat
`, mark))
	group := workertest.UniqueName("g")
	portA, portB := workertest.FreePort(t), workertest.FreePort(t)
	url := func(p int) string { return fmt.Sprintf("http://127.0.0.1:%d", p) }
	worker := func(name string, port int, trusts string) *stack {
		cfg := testConfig(t, exe)
		cfg.Worker.Name = name
		cfg.Sources.HTTP.Enabled = false
		cfg.UI.Port = port
		cfg.UI.AuthToken = "tok-0123456789abcdef"
		cfg.Shared.Dir = shared
		cfg.Fleet.TrustedURLs = []string{trusts}
		cfg.Executor.Timeout = config.Duration(5 * time.Minute) // held past the test's waits
		k := &cfg.Sources.Kafka
		k.Enabled, k.Brokers, k.Topic, k.Group = true, brokers, "orders-raw", group
		k.StartupAlignEnabled = false
		k.ClientConfig = map[string]string{"session.timeout.ms": "6000", "heartbeat.interval.ms": "500"}
		cfg.Sinks.Kafka = []config.KafkaSink{{Name: "results", Topic: "orders-out"}}
		return startStack(t, cfg)
	}
	a := worker("alpha", portA, url(portB))
	worker("beta", portB, url(portA))
	auth := []string{"Authorization", "Bearer tok-0123456789abcdef"}
	get := func(q string) GroupAnswer {
		t.Helper()
		r := do(t, "GET", a.uiURL+"/api/v1/debug/kafka/group"+q, "", auth...)
		var g GroupAnswer
		if r.status != 200 || json.Unmarshal([]byte(r.body), &g) != nil {
			return GroupAnswer{Scope: fmt.Sprintf("%d %s", r.status, r.body)}
		}
		return g
	}
	wait.For(t, wait.Long, "alpha and beta each own one partition", func() (bool, string) {
		g := get("")
		n := map[string]int{}
		for _, p := range g.GroupPartitions {
			if p.Owner != nil && !p.Unowned {
				n[p.Owner.Worker]++
			}
		}
		return n["alpha"] == 1 && n["beta"] == 1, fmt.Sprintf("%+v", g)
	})

	prod := manualProducer(t, brokers)
	for p := range int32(2) {
		for i := range 3 {
			rec := &kgo.Record{Topic: "orders-raw", Partition: p, Key: fmt.Appendf(nil, "stuck-%d", p), Value: fmt.Appendf(nil, "m%d", i)}
			if err := prod.ProduceSync(t.Context(), rec).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	var g GroupAnswer
	wait.For(t, wait.Long, "alpha's fleet view naming the key holding each partition at attempt 2", func() (bool, string) {
		g = get("?scope=fleet")
		if len(g.GroupPartitions) != 2 {
			return false, fmt.Sprintf("%+v", g)
		}
		for _, p := range g.GroupPartitions {
			h := p.HeadOfLine
			if h == nil || len(h.Keys) != 1 {
				return false, fmt.Sprintf("partition %d (owner %+v): %+v", p.Partition, p.Owner, h)
			}
			k := h.Keys[0]
			if k.Key != fmt.Sprintf("stuck-%d", p.Partition) || k.Behind != 2 || k.Attempt == nil || *k.Attempt != 2 || len(k.TaskIDs) != 1 {
				at := "null"
				if k.Attempt != nil {
					at = fmt.Sprint(*k.Attempt)
				}
				return false, fmt.Sprintf("partition %d (owner %s): key %s, %d behind, attempt %s, tasks %v", p.Partition, p.Owner.Worker, k.Key, k.Behind, at, k.TaskIDs)
			}
		}
		return true, ""
	})
	if g.Scope != "fleet" || len(g.HeadOfLinePeers) != 1 || g.HeadOfLinePeers[0] != (WorkerURL{"beta", url(portB)}) || len(g.HeadOfLineMissing) != 0 {
		t.Errorf("scope %q, peers %+v, missing %+v; want beta at %s asked, nobody missing", g.Scope, g.HeadOfLinePeers, g.HeadOfLineMissing, url(portB))
	}
	local := get("")
	for _, p := range local.GroupPartitions {
		if p.Owner.Worker == "beta" && p.HeadOfLine != nil {
			t.Errorf("scope local: beta's partition %d has a head of line %+v; only scope fleet asks beta", p.Partition, p.HeadOfLine)
		}
		if p.Owner.Worker == "alpha" && (p.HeadOfLine == nil || len(p.HeadOfLine.Keys) != 1) {
			t.Errorf("scope local: alpha's partition %d has no key holding it: %+v", p.Partition, p.HeadOfLine)
		}
	}
	if r := do(t, "GET", a.uiURL+"/api/v1/debug/kafka/group?scope=all", "", auth...); r.status != 400 {
		t.Errorf("scope=all = %d %s, want 400", r.status, r.body)
	}
	if err := os.WriteFile(mark, nil, 0o644); err != nil {
		t.Fatal(err)
	}
}
