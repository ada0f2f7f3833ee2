package worker

import (
	"fmt"
	"math"
	"testing"
)

// TestIDGenNext: ids are "<12 hex digits>-<n>", n counting from 1, and two
// generators never share a prefix (so ids stay unique across a fleet).
func TestIDGenNext(t *testing.T) {
	g, h := NewIDGen(), NewIDGen()
	if g.prefix == h.prefix {
		t.Fatalf("two generators share the prefix %q", g.prefix)
	}
	for i := 1; i <= 3; i++ {
		if got, want := g.Next(), fmt.Sprintf("%s-%d", g.prefix, i); got != want || len(g.prefix) != 12 {
			t.Errorf("Next() = %q, want %q", got, want)
		}
	}
	g.n.Store(math.MaxUint64 - 1)
	if got, want := g.Next(), g.prefix+"-18446744073709551615"; got != want {
		t.Errorf("Next() at the counter's end = %q, want %q", got, want)
	}
}

// BenchmarkIDGenNext guards the id's cost: one allocation, no fmt (it runs
// once per task; fmt.Sprintf was 2 % of the Kafka path's CPU).
func BenchmarkIDGenNext(b *testing.B) {
	g := NewIDGen()
	b.ReportAllocs()
	for b.Loop() {
		_ = g.Next()
	}
}
