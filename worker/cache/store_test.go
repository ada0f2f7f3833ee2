package cache

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"svc/worker/workertest"
)

// clock is a settable time source for tests.
type clock struct{ ms atomic.Int64 }

func (c *clock) now() time.Time { return time.UnixMilli(c.ms.Load()) }

type opened struct {
	*Store
	clock *clock
	reg   *prometheus.Registry
	logs  *workertest.Logs
}

// open opens a store named worker in dir ("" for memory) at clock time 1000.
func open(t *testing.T, dir, worker string, tune ...func(*Config)) opened {
	t.Helper()
	o := opened{clock: &clock{}, reg: prometheus.NewRegistry(), logs: &workertest.Logs{}}
	o.clock.ms.Store(1000)
	cfg := Config{Dir: dir, Worker: worker, MaxRows: 10_000, MaxBytes: 8 << 20, Logger: o.logs.Logger(), Registry: o.reg, Now: o.clock.now}
	for _, f := range tune {
		f(&cfg)
	}
	s, err := Open(t.Context(), cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	o.Store = s
	return o
}

func get(t *testing.T, s *Store, scope, key string) (Row, bool) {
	t.Helper()
	r, ok, err := s.Get(t.Context(), scope, key)
	if err != nil {
		t.Fatalf("Get(%s, %s): %v", scope, key, err)
	}
	return r, ok
}

func put(t *testing.T, s *Store, scope, key, value string) {
	t.Helper()
	if err := s.Put(t.Context(), scope, key, []byte(value)); err != nil {
		t.Fatalf("Put(%s, %s): %v", scope, key, err)
	}
}

func TestScopesAreSeparateKeySpacesAndLookupPrefersTheNarrowest(t *testing.T) {
	t.Parallel()
	s := open(t, t.TempDir(), "w1")
	put(t, s.Store, ScopeGlobal, "fx", "g")
	if r, ok, _ := s.Lookup(t.Context(), "fx"); !ok || string(r.Value) != "g" {
		t.Fatalf("Lookup(fx) = %q %v, want the global row", r.Value, ok)
	}
	put(t, s.Store, ScopeCluster, "fx", "c")
	put(t, s.Store, ScopeLocal, "fx", "l")
	for scope, want := range map[string]string{ScopeLocal: "l", ScopeCluster: "c", ScopeGlobal: "g"} {
		if r, ok := get(t, s.Store, scope, "fx"); !ok || string(r.Value) != want || r.Origin != "w1" {
			t.Errorf("Get(%s, fx) = %+v %v, want %q from w1", scope, r, ok, want)
		}
	}
	if r, _, _ := s.Lookup(t.Context(), "fx"); string(r.Value) != "l" {
		t.Errorf("Lookup(fx) = %q, want the local row", r.Value)
	}
	if _, ok, _ := s.Lookup(t.Context(), "nope"); ok {
		t.Error("Lookup of a missing key found a row")
	}
	if st := s.Stats(); st.Rows != 3 || st.Bytes != 3*3 {
		t.Errorf("Stats = %+v, want 3 rows of 3 bytes", st)
	}
}

// A local write always replaces what its worker holds, even a row stamped
// ahead of the local clock, and its timestamps only rise.
func TestLocalWritesReplaceWhatIsHeld(t *testing.T) {
	t.Parallel()
	s := open(t, "", "w1")
	if _, err := s.Apply(t.Context(), []Row{{Scope: ScopeCluster, Key: "k", Value: []byte("peer"), TSms: 5000, Origin: "w2"}}); err != nil {
		t.Fatal(err)
	}
	put(t, s.Store, ScopeCluster, "k", "mine")
	r, _ := get(t, s.Store, ScopeCluster, "k")
	if string(r.Value) != "mine" || r.TSms != 5001 || r.Origin != "w1" {
		t.Errorf("after a local write = %+v, want mine at 5001 from w1", r)
	}
	put(t, s.Store, ScopeLocal, "other", "x") // the clock moved past 5001 too
	if r, _ := get(t, s.Store, ScopeLocal, "other"); r.TSms != 5002 {
		t.Errorf("next write ts = %d, want 5002", r.TSms)
	}
	if c, g := s.Marks(); c != 5001 || g != 0 {
		t.Errorf("Marks = %d, %d, want 5001, 0 (local writes move no mark)", c, g)
	}
}

func TestBoundsRefuseWrites(t *testing.T) {
	t.Parallel()
	s := open(t, "", "w1", func(c *Config) { c.MaxRows = 2; c.MaxBytes = MaxKeyBytes + MaxValueBytes + 100 })
	cases := []struct {
		name, scope, key string
		value            []byte
		want             error
	}{
		{"empty key", ScopeLocal, "", nil, ErrBadKey},
		{"key over 256 bytes", ScopeLocal, strings.Repeat("k", MaxKeyBytes+1), nil, ErrBadKey},
		{"key not utf-8", ScopeLocal, "\xff", nil, ErrBadKey},
		{"value over 64 KiB", ScopeLocal, "k", make([]byte, MaxValueBytes+1), ErrValueTooLarge},
		{"unknown scope", "fleet", "k", nil, ErrBadScope},
	}
	for _, c := range cases {
		if err := s.Put(t.Context(), c.scope, c.key, c.value); !errors.Is(err, c.want) {
			t.Errorf("%s: Put = %v, want %v", c.name, err, c.want)
		}
	}
	if err := s.Put(t.Context(), ScopeLocal, strings.Repeat("k", MaxKeyBytes), make([]byte, MaxValueBytes)); err != nil {
		t.Fatalf("a row at both bounds: %v", err)
	}
	put(t, s.Store, ScopeLocal, "b", "1")
	if err := s.Put(t.Context(), ScopeLocal, "c", []byte("1")); !errors.Is(err, ErrFull) {
		t.Errorf("third row with max_rows 2: %v, want ErrFull", err)
	}
	put(t, s.Store, ScopeLocal, "b", "22") // a replacement needs no new row
	if err := s.Put(t.Context(), ScopeLocal, "b", make([]byte, 200)); !errors.Is(err, ErrFull) {
		t.Errorf("growing past max_bytes: %v, want ErrFull", err)
	}
	if r, _ := get(t, s.Store, ScopeLocal, "b"); string(r.Value) != "22" {
		t.Errorf("refused write changed the row: %q", r.Value)
	}
	if got := workertest.Metric(t, s.reg, "svc_cache_writes_total", "source", "local", "result", "refused_full"); got != 2 {
		t.Errorf("refused_full = %v, want 2", got)
	}
	if got := workertest.Metric(t, s.reg, "svc_cache_writes_total", "result", "refused_key"); got != 3 {
		t.Errorf("refused_key = %v, want 3", got)
	}
}

func TestFileKeepsRowsMarksAndEpochAcrossRestarts(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "storage")
	s := open(t, dir, "w1")
	put(t, s.Store, ScopeGlobal, "g", "1")
	put(t, s.Store, ScopeCluster, "c", "2")
	p1, _ := s.Changes(t.Context(), []string{ScopeCluster, ScopeGlobal}, "", 10)
	s.Close()

	fi, err := os.Stat(filepath.Join(dir, "w1.cache.db"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("cache file mode = %v (%v), want 0600", fi.Mode(), err)
	}
	if fi, _ := os.Stat(dir); fi.Mode().Perm() != 0o700 {
		t.Errorf("storage.dir mode = %v, want 0700", fi.Mode())
	}
	s2 := open(t, dir, "w1")
	if !s2.Persistent() || s2.Stats().Rows != 2 {
		t.Fatalf("reopened: persistent %v, %d rows", s2.Persistent(), s2.Stats().Rows)
	}
	if c, g := s2.Marks(); c != 1001 || g != 1000 {
		t.Errorf("Marks after restart = %d, %d, want 1001, 1000", c, g)
	}
	put(t, s2.Store, ScopeGlobal, "g2", "3")
	p2, err := s2.Changes(t.Context(), []string{ScopeGlobal}, p1.Next, 10)
	if err != nil || len(p2.Rows) != 1 || p2.Rows[0].Key != "g2" || p2.Rows[0].TSms != 1002 {
		t.Errorf("changes after the old cursor = %+v %v, want g2 at 1002 only", p2, err)
	}
}

func TestMemoryOnlyWarnsAndFallsBack(t *testing.T) {
	t.Parallel()
	s := open(t, "", "w1")
	if s.Persistent() || len(s.logs.Named("cache_engine_disabled_no_storage_dir")) != 1 {
		t.Errorf("empty storage.dir: persistent %v, logs %s", s.Persistent(), s.logs.String())
	}
	file := filepath.Join(t.TempDir(), "not-a-dir")
	os.WriteFile(file, nil, 0o600)
	f := open(t, file, "w1")
	if f.Persistent() || len(f.logs.Named("cache_memory_only_fallback")) != 1 {
		t.Errorf("unusable storage.dir: persistent %v, logs %s", f.Persistent(), f.logs.String())
	}
	put(t, f.Store, ScopeLocal, "k", "v")
	if r, ok := get(t, f.Store, ScopeLocal, "k"); !ok || string(r.Value) != "v" {
		t.Error("the memory fallback does not keep rows")
	}
}

func TestSymlinkInPlaceOfTheFileIsRefused(t *testing.T) {
	t.Parallel()
	dir, other := t.TempDir(), filepath.Join(t.TempDir(), "elsewhere.db")
	os.WriteFile(other, nil, 0o644)
	os.Symlink(other, filepath.Join(dir, "w1.cache.db"))
	s := open(t, dir, "w1")
	if s.Persistent() {
		t.Error("the cache opened a symlinked file")
	}
	if fi, _ := os.Stat(other); fi.Size() != 0 || fi.Mode().Perm() != 0o644 {
		t.Error("the symlink target was written or chmodded")
	}
}

func TestValuesKeepTheirBytes(t *testing.T) {
	t.Parallel()
	s := open(t, "", "w1")
	bin := []byte{0, 1, 2, 0xff}
	if err := s.Put(t.Context(), ScopeLocal, "bin", bin); err != nil {
		t.Fatal(err)
	}
	put(t, s.Store, ScopeLocal, "empty", "")
	if r, _ := get(t, s.Store, ScopeLocal, "bin"); !bytes.Equal(r.Value, bin) {
		t.Errorf("binary value = %v, want %v", r.Value, bin)
	}
	if r, ok := get(t, s.Store, ScopeLocal, "empty"); !ok || len(r.Value) != 0 {
		t.Errorf("empty value = %q %v", r.Value, ok)
	}
}
