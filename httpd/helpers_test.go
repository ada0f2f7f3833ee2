package httpd

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"svc/recorder"
	"svc/worker"
	"svc/worker/config"
)

// script writes an executable /bin/sh script into dir and returns its path.
func script(t testing.TB, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "exec.sh")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

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

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// startStack runs the App, the UI server and the ingress on 127.0.0.1:0,
// with a flight recorder attached unless cfg.UI.Enabled is false (as in
// production, the recorder runs only with the UI).
func startStack(t testing.TB, cfg *config.Config, tune ...func(*stack)) *stack {
	t.Helper()
	if problems := cfg.Validate(); len(problems) > 0 {
		t.Fatalf("test config invalid: %v", problems)
	}
	reg := worker.NewRegistry()
	log := quietLogger()
	app, err := worker.New(cfg, log, reg, worker.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := recorder.Open(context.Background(), recorder.Config{
		Dir: cfg.Storage.Dir, SharedDir: cfg.Shared.Dir, Worker: cfg.Worker.Name, Cluster: cfg.Worker.Cluster,
		StartedAt: app.Started, Logger: log,
	})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.UI.Enabled {
		app.AttachRecorder(rec)
	}
	s := &stack{cfg: cfg, app: app, reg: reg, rec: rec, done: make(chan struct{})}
	s.ui, err = NewUIServer(UIDeps{Config: cfg, App: app, Gatherer: reg, Log: log, Recorder: rec})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.ui.Listen(); err != nil {
		t.Fatal(err)
	}
	s.ingress = NewIngress(cfg, app, reg, log)
	if err := s.ingress.Listen(); err != nil {
		t.Fatal(err)
	}
	for _, f := range tune {
		f(s)
	}
	s.uiURL, s.inURL = "http://"+s.ui.Addr(), "http://"+s.ingress.Addr()
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	go func() {
		defer close(s.done)
		errc := make(chan error, 3)
		go func() { errc <- s.ui.Run(ctx, time.Second) }()
		go func() { errc <- s.ingress.Run(ctx, 5*time.Second) }()
		go func() { errc <- rec.Run(ctx) }()
		<-errc
		<-errc
		<-errc
		app.Drain(time.Second)
		app.Close()
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
