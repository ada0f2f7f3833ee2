// Package workertest holds the helpers the test suites share: /bin/sh
// executors, a kfake cluster with produce faults, log capture, metric
// reads, free ports, unique names and the svc binary as a child process.
package workertest

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"flag"
	"io"
	"log/slog"
	mrand "math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
)

// Script writes an executable /bin/sh script with body into a fresh temp
// dir and returns its path.
func Script(t testing.TB, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "executor.sh")
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// EchoBody prints "out:" + the payload and fails (exit 1) when the payload
// contains "fail"; it forks nothing (builtins only).
const EchoBody = `IFS= read -r in
case "$in" in *fail*) echo "failing on purpose: $in" >&2; exit 1;; esac
printf 'out:%s' "$in"`

// EchoScript is an executor running EchoBody.
func EchoScript(t testing.TB) string { return Script(t, EchoBody) }

// Gate is an executor that holds every task until the gate is opened.
type Gate struct {
	Path string // the executor
	file string
}

// NewGate returns a closed gate in front of EchoBody.
func NewGate(t testing.TB) *Gate {
	t.Helper()
	g := &Gate{file: filepath.Join(t.TempDir(), "gate-open")}
	g.Path = Script(t, `while [ ! -e '`+g.file+`' ]; do sleep 0.05; done
`+EchoBody)
	return g
}

// Open lets every waiting and later task through.
func (g *Gate) Open(t testing.TB) {
	t.Helper()
	if err := os.WriteFile(g.file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

// Close holds the next tasks again.
func (g *Gate) Close(t testing.TB) {
	t.Helper()
	if err := os.Remove(g.file); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
}

// UniqueName is prefix plus 8 random hex digits.
func UniqueName(prefix string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return prefix + "-" + hex.EncodeToString(b[:])
}

// FreePort returns a loopback port for a test to bind later: free when
// checked, below the kernel's ephemeral range (so no listen on port 0 and
// no outgoing connection of a parallel test takes it meanwhile), handed
// out once in this process and locked against the other test processes
// (a file lock held until this process exits). A port picked by listening
// on port 0 and closing went back to that range, and under a full
// parallel run another socket took one before the worker bound it.
func FreePort(t testing.TB) int {
	t.Helper()
	lo, hi := reservedPorts()
	portsMu.Lock()
	defer portsMu.Unlock()
	for range 1000 {
		p := lo + mrand.IntN(hi-lo)
		if _, taken := portLocks[p]; taken {
			continue
		}
		f, err := os.OpenFile(filepath.Join(portLockDir(t), strconv.Itoa(p)), os.O_CREATE|os.O_RDWR, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
			f.Close() // another test process holds it
			continue
		}
		portLocks[p] = f // kept: the port is never handed out again
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue // in use by something else
		}
		ln.Close()
		return p
	}
	t.Fatalf("no free port in %d-%d", lo, hi-1)
	return 0
}

var (
	portsMu   sync.Mutex
	portLocks = map[int]*os.File{}
)

// reservedPorts is the range FreePort picks from: the 10,000 ports below
// the kernel's ephemeral range (Linux: 32768-60999 by default).
func reservedPorts() (lo, hi int) {
	hi = 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil && n > 2048 {
				hi = n
			}
		}
	}
	return max(1024, hi-10000), hi
}

// portLockDir is the folder of FreePort's lock files, shared by the test
// processes of one user.
func portLockDir(t testing.TB) string {
	dir := filepath.Join(os.TempDir(), "svc-test-ports-"+strconv.Itoa(os.Getuid()))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return dir
}

// Logs is a concurrency-safe buffer behind a JSON slog handler.
type Logs struct {
	mu  sync.Mutex
	b   bytes.Buffer
	tee io.Writer
}

func (l *Logs) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.tee != nil {
		_, _ = l.tee.Write(p)
	}
	return l.b.Write(p)
}

// Tee also copies every later line to w (a child process's stderr).
func (l *Logs) Tee(w io.Writer) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.tee = w
}

// String is everything logged so far.
func (l *Logs) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Named returns every record logged with message name, decoded.
func (l *Logs) Named(name string) []map[string]any {
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(l.String()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil && m["msg"] == name {
			out = append(out, m)
		}
	}
	return out
}

// Logger logs into l at debug level.
func (l *Logs) Logger() *slog.Logger {
	return slog.New(slog.NewJSONHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// Tail returns the last n lines of s.
func Tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Quiet is a logger that discards everything.
func Quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

// Metric sums the samples of family name whose labels include the
// label/value pairs in want.
func Metric(t testing.TB, g prometheus.Gatherer, name string, want ...string) float64 {
	t.Helper()
	fams, err := g.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	var sum float64
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
	next:
		for _, m := range f.GetMetric() {
			for i := 0; i+1 < len(want); i += 2 {
				found := false
				for _, lp := range m.GetLabel() {
					if lp.GetName() == want[i] && lp.GetValue() == want[i+1] {
						found = true
					}
				}
				if !found {
					continue next
				}
			}
			sum += m.GetGauge().GetValue() + m.GetCounter().GetValue() + m.GetUntyped().GetValue() // nil-safe getters
		}
	}
	return sum
}

// Gather renders every series of g in the text exposition format.
func Gather(t testing.TB, g prometheus.Gatherer) string {
	t.Helper()
	fams, err := g.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	var b strings.Builder
	for _, f := range fams {
		if _, err := expfmt.MetricFamilyToText(&b, f); err != nil {
			t.Fatalf("render %s: %v", f.GetName(), err)
		}
	}
	return b.String()
}

// ShortParallel is for a TestMain whose tests mostly wait: a -short run
// without -parallel runs n parallel tests at once instead of GOMAXPROCS.
func ShortParallel(n int) {
	flag.Parse()
	if !testing.Short() || n <= runtime.GOMAXPROCS(0) {
		return
	}
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		_ = flag.Set("test.parallel", strconv.Itoa(n))
	}
}

// Ann is an annotation with its payload decoded, for comparisons.
type Ann struct {
	Kind    string
	Payload map[string]any
}
