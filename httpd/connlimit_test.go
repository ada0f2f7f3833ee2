package httpd

import (
	"net"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"svc/worker/config"
)

// The derived caps share what the file limit leaves after the reserve;
// a configured cap above it is lowered and named.
func TestPlanConnCaps(t *testing.T) {
	t.Parallel()
	cfg := config.Default()
	cfg.Sources.HTTP.Enabled = true
	for _, c := range []struct {
		nofile                        int
		reserve, ingress, ui, metrics int
	}{
		{1024, 256, 384, 192, 64},
		{20000, 5000, 7500, 3750, 64},
		{1 << 20, 1 << 18, 16384, 4096, 64},
		{256, 256, 8, 8, 8},
	} {
		got := PlanConnCaps(&cfg, c.nofile)
		if got.Reserve != c.reserve || got.Ingress != c.ingress || got.UI != c.ui || got.Metrics != c.metrics || len(got.Clamped) > 0 {
			t.Errorf("nofile %d: %+v, want reserve %d ingress %d ui %d metrics %d", c.nofile, got, c.reserve, c.ingress, c.ui, c.metrics)
		}
	}
	cfg.Sources.HTTP.MaxConnections, cfg.UI.MaxConnections, cfg.Metrics.Enabled = 50_000, 10, false
	got := PlanConnCaps(&cfg, 20000)
	if got.Ingress != 15000 || got.UI != 10 || got.Metrics != 0 || !slices.Equal(got.Clamped, []string{"sources.http.max_connections"}) || !got.Over {
		t.Errorf("configured caps: %+v, want ingress clamped to 15000, ui 10, metrics off, over", got)
	}
}

// openFiles counts this process's open descriptors.
func openFiles(t *testing.T) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd")
	}
	return len(fds)
}

// An ingress capped at 8 holds at most 8 of 40 idle connections open (the
// rest wait in the accept queue), and a closed one frees its slot.
func TestIngressHoldsAtMostItsCap(t *testing.T) {
	cfg := testConfig(t, "/bin/cat")
	cfg.Sources.HTTP.MaxConnections = 8
	s := startStack(t, cfg)
	if r := do(t, "POST", s.inURL+"/v1/process", "warm"); r.status != 200 {
		t.Fatalf("warm-up = %d %s", r.status, r.body)
	}
	http0 := openFiles(t)
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	for range 40 {
		c, err := net.Dial("tcp", s.ingress.Addr())
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	time.Sleep(300 * time.Millisecond)
	accepted := openFiles(t) - http0 - len(conns)
	if accepted > 8+2 { // a little slack for the worker's own files
		t.Fatalf("the ingress holds %d of %d idle connections open, want at most its cap of 8", accepted, len(conns))
	}
	for _, c := range conns {
		_ = c.Close()
	}
	conns = nil
	if r := do(t, "POST", s.inURL+"/v1/process", "after"); r.status != 200 || !strings.Contains(r.body, `"output":"after"`) {
		t.Errorf("after the idle connections closed = %d %s", r.status, r.body)
	}
}

// Closing a capped listener ends an Accept that waits for a slot, so a
// server at its cap still shuts down.
func TestLimitListenerCloseEndsWaitingAccept(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := limitListen(ln, "test", 1)
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	held, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	done := make(chan error, 1)
	go func() { _, err := l.Accept(); done <- err }()
	time.Sleep(50 * time.Millisecond)
	_ = l.Close()
	select {
	case err := <-done:
		if err == nil {
			t.Error("Accept after Close returned a connection")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Accept still waits after Close")
	}
}
