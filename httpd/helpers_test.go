package httpd

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"svc/recorder"
	"svc/worker"
	"svc/worker/config"
	"svc/worker/workertest"
)

// script writes an executable /bin/sh script and returns its path.
func script(t testing.TB, body string) string { return workertest.Script(t, body) }

// testConfig is an HTTP-only config on loopback with free ports.
func testConfig(t testing.TB, binary string) *config.Config {
	t.Helper()
	cfg := config.Default()
	cfg.Worker.Name = "test"
	cfg.UI.Port, cfg.Sources.HTTP.Port, cfg.Metrics.Port = 0, 0, 0
	cfg.Sources.HTTP.Host = "127.0.0.1"
	cfg.Sources.HTTP.Enabled = true
	cfg.Executor.BinaryPath = binary
	cfg.Executor.PoolSize = 2
	cfg.Executor.Timeout = config.Duration(5 * time.Second)
	cfg.Handler.RetryBackoff = config.Duration(time.Millisecond)
	cfg.Worker.ShutdownTimeout = config.Duration(5 * time.Second)
	cfg.Storage.Dir = ""
	cfg.Metrics.Enabled = false
	cfg.RuntimeHealth.Enabled = false
	// A release that is never cached (no repo to fetch it from): pages
	// answer 503 unless a test serves the embedded one (withSite).
	cfg.UI.Release.CacheDir, cfg.UI.Release.Version = t.TempDir(), uncachedRelease
	cfg.Resolve()
	return &cfg
}

type stack struct {
	rec     *recorder.Recorder
	cfg     *config.Config
	app     *worker.App
	reg     *prometheus.Registry
	ui      *UIServer
	ingress *Ingress
	uiURL   string
	inURL   string
	cancel  context.CancelFunc
	done    chan struct{}
}

// uncachedRelease is a UI release tag no test cache holds.
const uncachedRelease = "v0.0.1"

func quietLogger() *slog.Logger { return workertest.Quiet() }

// buildStack builds the worker `svc run` builds from cfg (httpd/root,
// through BuildWorker) without running it.
func buildStack(t testing.TB, cfg *config.Config, o BuildOptions) (*stack, Built) {
	t.Helper()
	cfg.Resolve()
	if problems := cfg.Validate(); len(problems) > 0 {
		t.Fatalf("test config invalid:\n%s", strings.Join(problems, "\n"))
	}
	if o.Log == nil {
		o.Log = quietLogger()
	}
	b := BuildWorker(t, cfg, o)
	s := &stack{cfg: cfg, app: b.App, reg: b.Registry, rec: b.Recorder, ui: b.UI, ingress: b.Ingress, done: make(chan struct{})}
	if s.ui != nil {
		s.uiURL = "http://" + s.ui.Addr()
	}
	if s.ingress != nil {
		s.inURL = "http://" + s.ingress.Addr()
	}
	return s, b
}

// startStack builds the worker `svc run` builds from cfg and runs it
// until the test ends. tune may adjust the built servers before they run.
func startStack(t testing.TB, cfg *config.Config, tune ...func(*stack)) *stack {
	t.Helper()
	s, b := buildStack(t, cfg, BuildOptions{})
	for _, f := range tune {
		f(s)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	go func() {
		defer close(s.done)
		_ = b.Run(ctx)
	}()
	t.Cleanup(func() { s.stop() })
	return s
}

func (s *stack) stop() {
	s.cancel()
	<-s.done
}

type resp struct {
	status int
	header http.Header
	body   string
}

func do(t *testing.T, method, url string, body string, header ...string) resp {
	t.Helper()
	return send(t, method, url, "", body, header...)
}

// doHost is do with a Host header of the caller's choice ("" keeps the
// address's own), which the http client only takes from Request.Host.
func doHost(t *testing.T, method, url, host string, header ...string) resp {
	t.Helper()
	return send(t, method, url, host, "", header...)
}

func send(t *testing.T, method, url, host, body string, header ...string) resp {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	r, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer r.Body.Close()
	b, _ := io.ReadAll(r.Body)
	return resp{status: r.StatusCode, header: r.Header, body: string(b)}
}

// lines counts the lines of a file (0 when missing).
func lines(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	return strings.Count(string(b), "\n")
}

// manualProducer is a client producing to the partition each record
// names, closed when the test ends.
func manualProducer(t *testing.T, brokers []string) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}
