package cache

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"svc/worker/workertest"
)

func keys(rows []Row) string {
	var out []string
	for _, r := range rows {
		out = append(out, r.Scope+":"+r.Key)
	}
	return strings.Join(out, ",")
}

// The peer route serves only this worker's own cluster and global rows,
// oldest first, in pages that resume at the cursor.
func TestChangesPagesOwnSharedRowsOnly(t *testing.T) {
	t.Parallel()
	s := open(t, t.TempDir(), "w1")
	put(t, s.Store, ScopeCluster, "c1", "1")
	put(t, s.Store, ScopeLocal, "l1", "x")
	put(t, s.Store, ScopeGlobal, "g1", "2")
	if _, err := s.Apply(t.Context(), []Row{{Scope: ScopeGlobal, Key: "peer", Value: []byte("p"), TSms: 9, Origin: "w2"}}); err != nil {
		t.Fatal(err)
	}
	put(t, s.Store, ScopeCluster, "c2", "3")
	both := []string{ScopeCluster, ScopeGlobal}

	p, err := s.Changes(t.Context(), both, "", 2)
	if err != nil || keys(p.Rows) != "cluster:c1,global:g1" || !p.More {
		t.Fatalf("first page = %s more=%v (%v), want c1,g1 and more", keys(p.Rows), p.More, err)
	}
	p, _ = s.Changes(t.Context(), both, p.Next, 2)
	if keys(p.Rows) != "cluster:c2" || p.More {
		t.Fatalf("second page = %s more=%v, want c2 and no more", keys(p.Rows), p.More)
	}
	last := p.Next
	if p, _ = s.Changes(t.Context(), both, last, 2); len(p.Rows) != 0 || p.Next != last {
		t.Errorf("page after the end = %s next %q, want none and the same cursor", keys(p.Rows), p.Next)
	}
	if p, _ = s.Changes(t.Context(), []string{ScopeGlobal}, "", 10); keys(p.Rows) != "global:g1" {
		t.Errorf("global only = %s", keys(p.Rows))
	}
	// A row rewritten moves behind the cursor.
	put(t, s.Store, ScopeCluster, "c1", "again")
	if p, _ = s.Changes(t.Context(), both, last, 10); keys(p.Rows) != "cluster:c1" || string(p.Rows[0].Value) != "again" {
		t.Errorf("after a rewrite = %s, want c1 again", keys(p.Rows))
	}
}

func TestChangesRefusesLocalScopeAndBadCursors(t *testing.T) {
	t.Parallel()
	s := open(t, "", "w1")
	if _, err := s.Changes(t.Context(), []string{ScopeLocal}, "", 10); !IsBadRequest(err) {
		t.Errorf("scope local: %v, want a bad request", err)
	}
	for _, c := range []string{"x", "0123456789abcdef", "0123456789abcdef-", "0123456789abcdef--1", "0123456789ABCDEF-1",
		"0123456789abcdef-01", "0123456789abcdef-99999999999999999999", strings.Repeat("a", 100)} {
		if _, err := s.Changes(t.Context(), []string{ScopeGlobal}, c, 10); !errors.Is(err, ErrBadCursor) {
			t.Errorf("since=%q: %v, want ErrBadCursor", c, err)
		}
	}
	// A well-formed cursor of another file starts over.
	put(t, s.Store, ScopeGlobal, "g", "1")
	p, err := s.Changes(t.Context(), []string{ScopeGlobal}, "0123456789abcdef-999999", 10)
	if err != nil || keys(p.Rows) != "global:g" {
		t.Errorf("foreign epoch = %s (%v), want every row", keys(p.Rows), err)
	}
}

func TestChangesCutsLargePages(t *testing.T) {
	t.Parallel()
	s := open(t, "", "w1", func(c *Config) { c.MaxBytes = 64 << 20 })
	big := strings.Repeat("v", MaxValueBytes)
	n := PageBytes/MaxValueBytes + 5
	for i := range n {
		put(t, s.Store, ScopeGlobal, fmt.Sprintf("k%03d", i), big)
	}
	p, _ := s.Changes(t.Context(), []string{ScopeGlobal}, "", MaxPageRows)
	if !p.More || len(p.Rows) >= n || len(p.Rows) == 0 {
		t.Fatalf("page of %d big rows: %d rows, more=%v; want a cut page", n, len(p.Rows), p.More)
	}
	got := len(p.Rows)
	for p.More {
		p, _ = s.Changes(t.Context(), []string{ScopeGlobal}, p.Next, MaxPageRows)
		got += len(p.Rows)
	}
	if got != n {
		t.Errorf("rows over all pages = %d, want %d", got, n)
	}
}

// Last write wins: the higher timestamp, then the higher origin; an equal
// pair keeps the row held. The same rows in any order give the same store.
func TestApplyIsLastWriteWins(t *testing.T) {
	t.Parallel()
	rows := []Row{
		{Scope: ScopeCluster, Key: "k", Value: []byte("a@10"), TSms: 10, Origin: "a"},
		{Scope: ScopeCluster, Key: "k", Value: []byte("b@10"), TSms: 10, Origin: "b"},
		{Scope: ScopeCluster, Key: "k", Value: []byte("a@9"), TSms: 9, Origin: "a"},
		{Scope: ScopeCluster, Key: "k", Value: []byte("c@8"), TSms: 8, Origin: "c"},
	}
	orders := [][]int{{0, 1, 2, 3}, {3, 2, 1, 0}, {1, 3, 0, 2}, {2, 0, 3, 1}}
	for _, order := range orders {
		s := open(t, "", "self")
		for _, i := range order {
			if _, err := s.Apply(t.Context(), []Row{rows[i]}); err != nil {
				t.Fatal(err)
			}
		}
		if r, _ := get(t, s.Store, ScopeCluster, "k"); string(r.Value) != "b@10" || r.Origin != "b" {
			t.Errorf("order %v: k = %q from %s, want b@10", order, r.Value, r.Origin)
		}
	}
	s := open(t, "", "self")
	a, _ := s.Apply(t.Context(), rows)
	if a.Stored != 2 || a.Superseded != 2 {
		t.Errorf("Apply = %+v, want 2 stored (a@10, then b@10) and 2 superseded", a)
	}
	if a, _ := s.Apply(t.Context(), rows[1:2]); a.Superseded != 1 || a.Stored != 0 {
		t.Errorf("the same row again = %+v, want superseded (kept)", a)
	}
	if got := workertest.Metric(t, s.reg, "svc_cache_writes_total", "source", "peer", "result", "superseded"); got != 3 {
		t.Errorf("peer superseded = %v, want 3", got)
	}
}

func TestApplyCountsRowsOverTheBounds(t *testing.T) {
	t.Parallel()
	s := open(t, "", "self", func(c *Config) { c.MaxRows = 2 })
	a, err := s.Apply(t.Context(), []Row{
		{Scope: ScopeGlobal, Key: "1", Value: []byte("x"), TSms: 1, Origin: "p"},
		{Scope: ScopeGlobal, Key: "2", Value: []byte("x"), TSms: 1, Origin: "p"},
		{Scope: ScopeGlobal, Key: "3", Value: []byte("x"), TSms: 1, Origin: "p"},
		{Scope: ScopeGlobal, Key: "1", Value: []byte("y"), TSms: 2, Origin: "p"},
	})
	if err != nil || a.Stored != 3 || a.Full != 1 || s.Stats().Rows != 2 {
		t.Errorf("Apply = %+v %v with %d rows, want 3 stored, 1 full, 2 rows", a, err, s.Stats().Rows)
	}
	if _, err := s.Apply(t.Context(), []Row{{Scope: "local", Key: "", TSms: 1, Origin: "p"}}); err == nil {
		t.Error("Apply took a row with an empty key")
	}
}

func TestListNewestFirstWithFilters(t *testing.T) {
	t.Parallel()
	s := open(t, "", "w1")
	put(t, s.Store, ScopeLocal, "fx:eur", "1")
	put(t, s.Store, ScopeGlobal, "fx:usd", "2")
	put(t, s.Store, ScopeGlobal, "other", "3")
	rows, _ := s.List(t.Context(), ListOptions{Limit: 10})
	if keys(rows) != "global:other,global:fx:usd,local:fx:eur" {
		t.Errorf("List = %s", keys(rows))
	}
	rows, _ = s.List(t.Context(), ListOptions{Prefix: "fx:", Scope: ScopeGlobal, Limit: 10})
	if keys(rows) != "global:fx:usd" {
		t.Errorf("List(prefix fx:, global) = %s", keys(rows))
	}
	if rows, _ = s.List(t.Context(), ListOptions{Limit: 1}); len(rows) != 1 {
		t.Errorf("List(limit 1) = %d rows", len(rows))
	}
}
