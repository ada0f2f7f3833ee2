package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/prometheus/client_golang/prometheus"

	"svc/worker"
	"svc/worker/cache"
	"svc/worker/config"
	"svc/worker/fleet"
)

// openCache opens the handler cache when cache.enabled (nil otherwise).
func openCache(ctx context.Context, cfg *config.Config, reg prometheus.Registerer, log *slog.Logger) (*cache.Store, error) {
	if !cfg.Cache.Enabled {
		return nil, nil
	}
	s, err := cache.Open(ctx, cache.Config{
		Dir: cfg.Storage.Dir, Worker: cfg.Worker.Name, MaxRows: cfg.Cache.MaxRows, MaxBytes: cfg.Cache.MaxBytes,
		Logger: log, Registry: reg,
	})
	if err != nil {
		return nil, fmt.Errorf("handler cache: %w", err)
	}
	return s, nil
}

// servesCache reports whether this worker serves its cache rows to peers
// (and so pulls theirs): the cache on, kept in storage.dir, exchange on.
func servesCache(cfg *config.Config, store *cache.Store) bool {
	return store != nil && store.Persistent() && cfg.CacheExchangeOn()
}

// newRegistry builds the worker registry (UI on only); bind returns the
// UI server's bound address once it listens.
func newRegistry(cfg *config.Config, app *worker.App, store *cache.Store, bind func() string, log *slog.Logger) *fleet.Registry {
	root := cfg.Shared.Dir
	if root == "" {
		root = cfg.Storage.Dir
	}
	host, _ := os.Hostname()
	fc := fleet.Config{
		Worker: cfg.Worker.Name, Cluster: cfg.Worker.Cluster, Release: worker.Version, StartedAt: app.Started(),
		Provider: cfg.Fleet.Registry.Provider, Root: root, Heartbeat: cfg.Fleet.Registry.Heartbeat.D(),
		Retention: cfg.Fleet.Registry.CardRetention.D(), Peers: cfg.Fleet.Registry.Peers, Status: app, Logger: log,
		URL: func() string { return fleet.CardURL(cfg.UI.PublicURL, bind(), host) },
	}
	if servesCache(cfg, store) {
		fc.Marks = func() *fleet.Marks {
			c, g := store.Marks()
			return &fleet.Marks{Cluster: c, Global: g}
		}
	}
	return fleet.New(fc)
}

// newExchange builds the cache exchange when this worker serves its
// cache (nil otherwise: the cache stays local).
func newExchange(cfg *config.Config, store *cache.Store, registry *fleet.Registry, reg prometheus.Registerer, log *slog.Logger) (*cache.Exchange, error) {
	if !servesCache(cfg, store) {
		return nil, nil
	}
	return cache.NewExchange(cache.ExchangeConfig{
		Store: store, Peers: registry, Cluster: cfg.Worker.Cluster, Interval: cfg.Fleet.CacheExchange.Interval.D(),
		Timeout: cfg.Fleet.CacheExchange.Timeout.D(), Registry: reg, Logger: log,
	})
}
