package kafka

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The brokers count as unreachable only after unreachableAfter without an
// answer with a real failure in it; the next answer clears it. The
// network-level scenario is netfault_partition_test.go at the top level.
func TestReachNeedsSilenceAndAFailure(t *testing.T) {
	r := newReach()
	start := time.Unix(0, r.lastOK.Load())
	meta := kgo.BrokerMetadata{}
	if un, _, _ := r.unreachable(start.Add(time.Minute)); un {
		t.Error("a minute of silence without any failure (an idle, paused consumer) counts as unreachable")
	}
	r.OnBrokerRead(meta, 0, 0, 0, 0, context.Canceled)
	if un, _, _ := r.unreachable(start.Add(time.Minute)); un {
		t.Error("a request the client canceled counts as a failure")
	}
	r.OnBrokerConnect(meta, 0, nil, errors.New("dial tcp 10.0.0.1:9092: i/o timeout"))
	if un, _, _ := r.unreachable(time.Now().Add(unreachableAfter / 2)); un {
		t.Errorf("unreachable after %s of silence, want only after %s", unreachableAfter/2, unreachableAfter)
	}
	un, since, lastErr := r.unreachable(start.Add(unreachableAfter + time.Second))
	if !un || !since.Equal(start) || lastErr != "dial tcp 10.0.0.1:9092: i/o timeout" {
		t.Errorf("after a failed dial and %s of silence: unreachable %v since %v (want %v), error %q", unreachableAfter, un, since, start, lastErr)
	}
	time.Sleep(time.Millisecond)
	r.OnBrokerRead(meta, 0, 100, 0, 0, nil)
	if un, _, _ := r.unreachable(time.Now().Add(time.Second)); un {
		t.Error("still unreachable after a broker answered")
	}
}
