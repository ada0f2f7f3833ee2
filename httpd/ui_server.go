package httpd

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"svc/worker"
)

// UIDeps are the parts the UI server reads from. Nil optional parts switch
// their routes to a clear "not available" answer.
type UIDeps struct {
	Config   *worker.Config
	App      *worker.App
	Gatherer prometheus.Gatherer
	Log      *slog.Logger
	// Bundle serves the SPA; nil means no bundle is cached (pages answer 503).
	Bundle http.Handler
}

// UIServer is the operator UI server: UI pages, /api/v1, /ws and probes.
type UIServer struct {
	surface
	cfg     *worker.Config
	app     *worker.App
	gather  prometheus.Gatherer
	log     *slog.Logger
	bundle  http.Handler
	started time.Time
}

// NewUIServer builds the UI server; it does not bind or start anything.
func NewUIServer(d UIDeps) *UIServer {
	s := &UIServer{
		cfg: d.Config, app: d.App, gather: d.Gatherer, log: d.Log, bundle: d.Bundle, started: time.Now(),
	}
	if d.App != nil {
		s.started = d.App.Started
	}
	addr := hostPort(d.Config.UI.Host, d.Config.UI.Port)
	s.surface = surface{
		name: "ui", log: d.Log,
		srv: &http.Server{
			Addr: addr, Handler: s.handler(),
			ReadTimeout: uiReadTimeout, ReadHeaderTimeout: uiReadHeaderTimeout,
			WriteTimeout: uiWriteTimeout, IdleTimeout: uiIdleTimeout, MaxHeaderBytes: uiMaxHeaderBytes,
			ErrorLog: slog.NewLogLogger(d.Log.Handler(), slog.LevelDebug),
		},
	}
	if d.Config.UI.AuthToken == "" {
		d.Log.Warn("ui_unauthenticated", "bind", addr,
			"opt_in_config", "set ui.auth_token in the config file",
			"opt_in_env", `or keep it out of the file: auth_token = "${SVC_UI_TOKEN}"`,
			"detail", "anyone who can reach this port is an operator of this worker")
	}
	return s
}

// handler composes the middleware around the route table, outermost first:
// panic recovery, body limit, token gate.
func (s *UIServer) handler() http.Handler {
	var h http.Handler = s.routes()
	h = requireToken(newTokenCheck(s.cfg.UI.AuthToken), h)
	h = limitBody(uiMaxBodyBytes, h)
	return recoverPanics(s.log, h)
}

// Listen binds the UI socket; a failure is fatal at startup.
func (s *UIServer) Listen() error { return s.listen() }

// Run serves until ctx ends.
func (s *UIServer) Run(ctx context.Context, grace time.Duration) error { return s.serve(ctx, grace) }

// SetTimeouts overrides the read limits (tests use short ones).
func (s *UIServer) SetTimeouts(readHeader, read, idle time.Duration) {
	s.srv.ReadHeaderTimeout, s.srv.ReadTimeout, s.srv.IdleTimeout = readHeader, read, idle
}

// URL is the address operators and peers use: ui.public_url, else the bind.
func (s *UIServer) URL() string {
	if s.cfg.UI.PublicURL != "" {
		return s.cfg.UI.PublicURL
	}
	return "http://" + s.Addr()
}
