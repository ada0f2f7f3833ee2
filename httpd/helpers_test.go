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

	"svc/recorder"
	"svc/worker"
	"svc/worker/config"
	"svc/worker/redrive"
	"svc/worker/workertest"
	"svc/worker/workertest/pipeline"
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

func quietLogger() *slog.Logger { return workertest.Quiet() }

// startStack runs the pipeline, the UI server and the ingress on
// 127.0.0.1:0 under the worker's lifecycle, with a flight recorder attached
// unless cfg.UI.Enabled is false (as in production, the recorder runs only
// with the UI).
func startStack(t testing.TB, cfg *config.Config, tune ...func(*stack)) *stack {
	t.Helper()
	p := pipeline.Build(t, cfg, nil)
	log := quietLogger()
	rec, err := recorder.Open(context.Background(), recorder.Config{
		Dir: cfg.Storage.Dir, SharedDir: cfg.Shared.Dir, Worker: cfg.Worker.Name, Cluster: cfg.Worker.Cluster,
		StartedAt: p.App.Started(), Logger: log, MaskEnv: config.MaskEnv,
	})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.UI.Enabled {
		p.App.AttachRecorder(rec)
	}
	s := &stack{cfg: cfg, app: p.App, reg: p.Reg, rec: rec, done: make(chan struct{})}
	deps := UIDeps{Config: cfg, App: p.App, Gatherer: p.Reg, Log: log, Recorder: rec}
	if cfg.Sources.Kafka.Enabled {
		if deps.Kafka, err = NewKafkaReader(cfg, log); err != nil {
			t.Fatal(err)
		}
		if deps.Redrive, err = redrive.New(cfg, deps.Kafka, p.App, log); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(deps.Redrive.Close)
	}
	s.ui, err = NewUIServer(deps)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.ui.Listen(); err != nil {
		t.Fatal(err)
	}
	s.ingress = NewIngress(cfg, p.App, p.Reg, log)
	if err := s.ingress.Listen(); err != nil {
		t.Fatal(err)
	}
	for _, f := range tune {
		f(s)
	}
	s.uiURL, s.inURL = "http://"+s.ui.Addr(), "http://"+s.ingress.Addr()
	life := worker.NewLifecycle(p.App, cfg.Worker.ShutdownTimeout.D(), log)
	life.Service("recorder", rec)
	life.Service("ui", s.ui)
	life.Intake("ingress", s.ingress)
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	go func() {
		defer close(s.done)
		_ = life.Run(ctx)
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
