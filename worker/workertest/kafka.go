package workertest

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// Cluster starts a one-broker kfake cluster on loopback seeded with topics
// of the given partition count, closed when the test ends. Group sessions
// may be as short as 500ms, so a killed member leaves its group quickly.
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
