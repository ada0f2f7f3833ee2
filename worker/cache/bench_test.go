package cache

import (
	"context"
	"strconv"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"svc/worker/model"
)

func benchStore(b *testing.B, dir string) *Store {
	b.Helper()
	s, err := Open(context.Background(), Config{Dir: dir, Worker: "w1", MaxRows: 1_000_000, MaxBytes: 1 << 30, Registry: prometheus.NewRegistry()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// BenchmarkPut is one fd 3 write stored in the file (one transaction).
func BenchmarkPut(b *testing.B) {
	s := benchStore(b, b.TempDir())
	v := make([]byte, 100)
	ctx := context.Background()
	for i := 0; b.Loop(); i++ {
		if err := s.Put(ctx, ScopeCluster, "k"+strconv.Itoa(i%1000), v); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPrepare is the read path of a task with 4 handler.cache_keys.
func BenchmarkPrepare(b *testing.B) {
	s := benchStore(b, b.TempDir())
	keys := []string{"a", "b", "c", "d"}
	for _, k := range keys {
		s.Put(context.Background(), ScopeGlobal, k, make([]byte, 100))
	}
	tc := NewTasks(s, keys)
	t := &model.Task{}
	for b.Loop() {
		tc.Prepare(t)()
	}
}

// BenchmarkChanges serves a page of 500 rows of 100 bytes.
func BenchmarkChanges(b *testing.B) {
	s := benchStore(b, b.TempDir())
	for i := range 2000 {
		s.Put(context.Background(), ScopeGlobal, "k"+strconv.Itoa(i), make([]byte, 100))
	}
	for b.Loop() {
		if _, err := s.Changes(context.Background(), []string{ScopeCluster, ScopeGlobal}, "", DefaultPageRows); err != nil {
			b.Fatal(err)
		}
	}
}
