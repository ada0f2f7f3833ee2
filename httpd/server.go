// Package httpd serves the worker's three HTTP surfaces: the operator UI
// server (UI, /api/v1, /ws, probes), the HTTP ingress and the metrics
// exporter.
package httpd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"time"

	"svc/worker/config"

	"github.com/prometheus/client_golang/prometheus"
)

// surface is one listening HTTP server.
type surface struct {
	name string
	srv  *http.Server
	ln   net.Listener
	log  *slog.Logger
}

// newSurface is a surface with the UI server's limits.
func newSurface(name, addr string, h http.Handler, log *slog.Logger) surface {
	return surface{name: name, log: log, srv: &http.Server{
		Addr: addr, Handler: h,
		ReadTimeout: uiReadTimeout, ReadHeaderTimeout: uiReadHeaderTimeout,
		WriteTimeout: uiWriteTimeout, IdleTimeout: uiIdleTimeout, MaxHeaderBytes: uiMaxHeaderBytes,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}}
}

// Adopt makes the surface serve ln, a socket bound by Bind.
func (s *surface) Adopt(ln net.Listener) { s.ln = ln }

// Addr is the bound address (useful with port 0).
func (s *surface) Addr() string {
	if s.ln == nil {
		return s.srv.Addr
	}
	return s.ln.Addr().String()
}

// serve runs until ctx ends, then closes the listener and lets requests
// in flight finish within grace.
func (s *surface) serve(ctx context.Context, grace time.Duration) error {
	errc := make(chan error, 1)
	go func() { errc <- s.srv.Serve(s.ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("%s: %w", s.name, err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	err := s.srv.Shutdown(sctx)
	if errors.Is(err, context.DeadlineExceeded) {
		s.log.Warn("shutdown_deadline_reached", "surface", s.name, "grace", grace.String())
		_ = s.srv.Close()
	}
	<-errc
	return nil
}

func hostPort(host string, port int) string {
	return net.JoinHostPort(host, strconv.Itoa(port))
}

// MetricsServer is the Prometheus exporter on metrics.port.
type MetricsServer struct{ surface }

// NewMetricsServer serves reg at /metrics.
func NewMetricsServer(cfg *config.Config, reg *prometheus.Registry, log *slog.Logger) *MetricsServer {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttpHandler(reg))
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("svc metrics exporter: see /metrics\n"))
	})
	return &MetricsServer{newSurface("metrics", hostPort(cfg.Metrics.Host, cfg.Metrics.Port), mux, log)}
}

// Run serves until ctx ends.
func (m *MetricsServer) Run(ctx context.Context) error { return m.serve(ctx, 5*time.Second) }

// Listeners are the sockets of the three surfaces (nil: off), bound before
// anything else so that a bind failure ends the worker first.
type Listeners struct {
	UI, Ingress, Metrics net.Listener
	// Caps is the connection plan each listener is capped by.
	Caps ConnCaps
}

// Bind binds the enabled surfaces' sockets, each capped (PlanConnCaps); on
// a failure it closes the ones it bound and names the surface and address.
func Bind(cfg *config.Config) (*Listeners, error) {
	l := &Listeners{Caps: PlanConnCaps(cfg, fileLimit())}
	bind := func(name, host string, port, n int, dst *net.Listener) error {
		addr := hostPort(host, port)
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("%s: bind %s: %w", name, addr, err)
		}
		*dst = limitListen(ln, name, n)
		return nil
	}
	var err error
	if cfg.UI.Enabled {
		err = bind("ui", cfg.UI.Host, cfg.UI.Port, l.Caps.UI, &l.UI)
	}
	if err == nil && cfg.Sources.HTTP.Enabled {
		err = bind("ingress", cfg.Sources.HTTP.Host, cfg.Sources.HTTP.Port, l.Caps.Ingress, &l.Ingress)
	}
	if err == nil && cfg.Metrics.Enabled {
		err = bind("metrics", cfg.Metrics.Host, cfg.Metrics.Port, l.Caps.Metrics, &l.Metrics)
	}
	if err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

// Log logs the connection plan and lets each capped listener warn
// connection_cap_reached on log.
func (l *Listeners) Log(log *slog.Logger) {
	l.Caps.Log(log)
	for _, ln := range []net.Listener{l.UI, l.Ingress, l.Metrics} {
		if ll, ok := ln.(*limitListener); ok {
			ll.log.Store(log)
		}
	}
}

// Close closes every listener (a second close is harmless).
func (l *Listeners) Close() {
	for _, ln := range []net.Listener{l.UI, l.Ingress, l.Metrics} {
		if ln != nil {
			_ = ln.Close()
		}
	}
}
