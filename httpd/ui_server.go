package httpd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"svc/kafkaread"
	"svc/recorder"
	"svc/ui"
	"svc/worker"
	"svc/worker/cache"
	"svc/worker/config"
	"svc/worker/fleet"
	"svc/worker/redrive"
	"svc/worker/runtimehealth"
	"svc/worker/throughput"
	"svc/worker/trends"
)

// UIDeps are the parts the UI server reads from. Nil optional parts switch
// their routes to a clear "not available" answer.
type UIDeps struct {
	Config   *config.Config
	App      *worker.App
	Gatherer prometheus.Gatherer
	Log      *slog.Logger
	// Bundle serves the SPA (a *release.Site; nil: pages answer 503). A
	// Tag() string method names the release served.
	Bundle http.Handler
	// Kafka serves the Kafka read API (NewKafkaReader); required.
	Kafka *kafkaread.Reader
	// Redrive re-produces DLQ records; nil without a Kafka source.
	Redrive *redrive.Redriver
	// Recorder is the flight recorder (always present with the UI on).
	Recorder *recorder.Recorder
	// Pause is the Kafka source's consume pause; nil without a Kafka source.
	Pause consumePauser
	// Runtime is the runtime health monitor; nil when it is switched off.
	Runtime *runtimehealth.Monitor
	// Throughput is the task cost tracker (disabled without a cost label).
	Throughput *throughput.Tracker
	// Fleet is the worker registry (the workers list); nil answers 404.
	Fleet *fleet.Registry
	// Cache is the handler cache; nil when cache.enabled is false.
	Cache *cache.Store
	// Trends feeds the Dashboard's trend charts; nil answers 404.
	Trends *trends.Sampler
	// Pages and ProbeDetails are the handler's UI declarations, validated
	// and normalized (GET /api/v1/pages answers [] when none).
	Pages        []ui.Page
	ProbeDetails ui.ProbeDetails
}

// UIServer is the operator UI server: UI pages, /api/v1, /ws and probes.
type UIServer struct {
	surface
	cfg      *config.Config
	app      *worker.App
	gather   prometheus.Gatherer
	log      *slog.Logger
	bundle   http.Handler
	kafka    *kafkaread.Reader
	redrive  *redrive.Redriver
	rec      *recorder.Recorder
	pause    consumePauser
	runtime  *runtimehealth.Monitor
	costs    *throughput.Tracker
	streams  *streamSlots
	fleet    *fleet.Registry
	cache    *cache.Store
	trends   *trends.Sampler
	uiPages  []ui.Page
	details  ui.ProbeDetails
	peers    *http.Client // asks other workers (traces, trends, running, head of line)
	ws       *wsEndpoint
	started  time.Time
	features map[string]bool // what identity advertises (SetFeatures)
}

// NewUIServer builds the UI server; it does not bind or start anything.
func NewUIServer(d UIDeps) (*UIServer, error) {
	s := &UIServer{
		cfg: d.Config, app: d.App, gather: d.Gatherer, log: d.Log, bundle: d.Bundle, kafka: d.Kafka, rec: d.Recorder, redrive: d.Redrive, pause: d.Pause, runtime: d.Runtime, costs: d.Throughput, started: time.Now(),
		streams: newStreamSlots(), features: map[string]bool{},
		fleet: d.Fleet, cache: d.Cache, peers: newPeerClient(), trends: d.Trends, uiPages: nonNil(d.Pages), details: ui.ProbeDetails{Fields: nonNil(d.ProbeDetails.Fields)},
	}
	if s.kafka == nil {
		return nil, errors.New("ui server: the Kafka read API is required (NewKafkaReader)")
	}
	if d.App != nil {
		s.started = d.App.Started()
	}
	s.ws = s.newWSEndpoint(defaultWSLimits())
	addr := hostPort(d.Config.UI.Host, d.Config.UI.Port)
	s.surface = newSurface("ui", addr, s.handler(), d.Log)
	s.srv.RegisterOnShutdown(s.ws.closeAll)
	s.srv.RegisterOnShutdown(s.peers.CloseIdleConnections)
	if d.Config.UI.AuthToken == "" {
		d.Log.Warn("ui_unauthenticated", "bind", addr,
			"opt_in_config", "set ui.auth_token in the config file",
			"opt_in_env", `or keep it out of the file: auth_token = "${SVC_UI_TOKEN}"`,
			"detail", "anyone who can reach this port is an operator of this worker")
	}
	return s, nil
}

// aliasInput is what the Kafka read API needs of the config to resolve its
// aliases; the sinks' and the DLQ's connections come resolved as their
// producers use them.
func aliasInput(cfg *config.Config) kafkaread.AliasInput {
	in := kafkaread.AliasInput{
		SourceEnabled: cfg.Sources.Kafka.Enabled, SourceTopic: cfg.Sources.Kafka.Topic, SourceConn: cfg.SourceConn(),
		DLQTopic: cfg.DLQ.Topic, DLQConn: cfg.DLQConn(),
	}
	for i, s := range cfg.Sinks.Kafka {
		in.Sinks = append(in.Sinks, kafkaread.SinkInput{Name: s.Name, Topic: s.Topic, Conn: cfg.SinkConn(i)})
	}
	return in
}

// NewKafkaReader resolves the read API's aliases and logs the startup
// warnings about them.
func NewKafkaReader(cfg *config.Config, log *slog.Logger) (*kafkaread.Reader, error) {
	aliases, shadowed := kafkaread.BuildAliases(aliasInput(cfg))
	for _, name := range shadowed {
		log.Warn("kafka_read_alias_shadowed", "sink", name,
			"detail", "a sink named '"+name+"' keeps delivering but is not readable under that name: the reserved alias wins")
	}
	if cfg.UI.AuthToken == "" && cfg.UI.KafkaReadEnabled {
		if exposed := kafkaread.ExposedWithoutAuth(aliases); len(exposed) > 0 {
			log.Warn("kafka_read_exposed_without_ui_auth", "aliases", exposed,
				"detail", "these aliases read a secured Kafka cluster through an API without a token: set ui.auth_token or ui.kafka_read_enabled = false")
		}
	}
	r, err := kafkaread.New(aliases)
	if err != nil {
		return nil, fmt.Errorf("kafka read api: %w", err)
	}
	return r, nil
}

// handler composes the middleware around the route table; the outermost
// is applied last.
func (s *UIServer) handler() http.Handler {
	var h http.Handler = s.routes()
	h = requireToken(newTokenCheck(s.cfg.UI.AuthToken), h)
	h = s.pageGate(h)
	h = s.guardCrossSite(h)
	h = guardKillSwitches(s.killSwitches(), h)
	h = limitBody(uiMaxBodyBytes, h)
	h = guardHost(newHostRule(s.cfg.UI.Host, s.cfg.UI.PublicURL, s.cfg.UI.AllowedHosts, "ui.allowed_hosts"), h)
	return recoverPanics(s.log, h)
}

// Run serves until ctx ends, then gives requests uiShutdownGrace.
func (s *UIServer) Run(ctx context.Context) error { return s.serve(ctx, uiShutdownGrace) }

// URL is the address operators and peers use: ui.public_url, else the bind.
func (s *UIServer) URL() string {
	if s.cfg.UI.PublicURL != "" {
		return s.cfg.UI.PublicURL
	}
	return "http://" + s.Addr()
}
