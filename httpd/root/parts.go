package root

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/prometheus/client_golang/prometheus"

	"svc/httpd"
	"svc/recorder"
	"svc/ui"
	"svc/ui/release"
	"svc/worker"
	"svc/worker/cache"
	"svc/worker/config"
	"svc/worker/event"
	"svc/worker/fleet"
	"svc/worker/model"
	"svc/worker/runtimehealth"
	"svc/worker/throughput"
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

// newRegistry builds the worker registry; bind returns the UI server's
// address once it listens. Its card carries the load read from g.
func newRegistry(cfg *config.Config, app *worker.App, store *cache.Store, g prometheus.Gatherer, bind func() string, log *slog.Logger) *fleet.Registry {
	root := cfg.Shared.Dir
	if root == "" {
		root = cfg.Storage.Dir
	}
	host, _ := os.Hostname()
	fc := fleet.Config{
		Worker: cfg.Worker.Name, Cluster: cfg.Worker.Cluster, Release: worker.Version, StartedAt: app.Started(),
		Provider: cfg.Fleet.Registry.Provider, Root: root, Heartbeat: cfg.Fleet.Registry.Heartbeat.D(),
		Retention: cfg.Fleet.Registry.CardRetention.D(), Peers: cfg.Fleet.Registry.Peers, Trusted: cfg.Fleet.TrustedURLs,
		Status: app, Logger: log, Load: newLoadReader(g, cfg.Sources.Kafka.Enabled).read,
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

// newMonitors builds the runtime health monitor (nil when switched off),
// whose samples become runtime_health events, and the task cost tracker.
func newMonitors(cfg *config.Config, events *model.Events, pool model.PoolStats, reg prometheus.Registerer, log *slog.Logger) (*runtimehealth.Monitor, *throughput.Tracker, error) {
	tracker, err := throughput.New(throughput.Options{
		CostLabel: cfg.Throughput.CostLabel, Window: cfg.Throughput.Window.D(),
		Registerer: reg, Logger: log.With("component", "throughput"),
	})
	if err != nil {
		return nil, nil, fmt.Errorf("throughput: %w", err)
	}
	if !cfg.RuntimeHealth.Enabled {
		return nil, tracker, nil
	}
	monitor, err := runtimehealth.New(runtimehealth.Options{
		Interval: cfg.RuntimeHealth.Interval.D(), StallThreshold: cfg.RuntimeHealth.StallThreshold.D(),
		Registerer: reg, Logger: log.With("component", "runtime_health"),
		Emit: func(kind string, payload any) {
			events.Event(event.TypeRuntimeHealth, kind, "", nil, payload)
		},
		PoolQueue: func() (int, int, int) {
			if pool == nil { // a swapped task runner without pool stats
				return 0, 0, 0
			}
			return pool.Busy(), pool.Size(), pool.Waiting()
		},
	})
	if err != nil {
		return nil, nil, fmt.Errorf("runtime health: %w", err)
	}
	return monitor, tracker, nil
}

// newSite serves the configured UI release (pages answer 503 until it is
// cached). peers lists the trusted workers' origins, the only others that
// pages may connect to: never a URL an untrusted card names.
func newSite(cfg *config.Config, pages []ui.Page, peers func() []string, log *slog.Logger) (*release.Site, error) {
	var slugs []string
	for _, p := range pages {
		slugs = append(slugs, p.Slug)
	}
	r := cfg.UI.Release
	site, err := release.NewSite(release.SiteOptions{
		Fetch:       release.FetchOptions{Repo: r.Repo, Tag: r.Version, CacheDir: r.CacheDir},
		Pages:       release.PagesOptions{Slugs: slugs, ConnectSources: peers},
		Unavailable: httpd.BundleUnavailable(r.Version),
		Logger:      log.With("component", "ui_bundle"),
	})
	if err != nil {
		return nil, fmt.Errorf("ui bundle: %w", err)
	}
	return site, nil
}

// recorderConfig maps the worker config onto the recorder's.
func recorderConfig(cfg *config.Config, app *worker.App, log *slog.Logger) recorder.Config {
	return recorder.Config{
		Dir: cfg.Storage.Dir, SharedDir: cfg.Shared.Dir, Worker: cfg.Worker.Name, Cluster: cfg.Worker.Cluster,
		StartedAt: app.Started(), SealInterval: cfg.History.SealInterval.D(), LiveMaxBytes: cfg.History.LiveMaxBytes,
		ArchiveEnabled: cfg.History.Archive.Enabled, ArchiveAfter: cfg.History.Archive.After.D(),
		ArchiveWindow: cfg.History.Archive.Window.D(), MergedRetentionDays: cfg.History.MergedRetentionDays,
		MaxBytes: cfg.History.MaxBytes, MaxAge: cfg.History.MaxAge.D(),
		FullDetail: cfg.History.TaskDetail == "full", SampleAbove: cfg.History.SampleAbovePerSecond,
		MaskEnv: maskEnvOnce, Logger: log,
	}
}

// maskEnvOnce is the recorder's redaction of a task row's environment:
// config.MaskEnv, but the map itself (already redacted by Events) when no
// name is secret. The key encoding entry, on every keyed row, is not.
func maskEnvOnce(env map[string]string) map[string]string {
	for k := range env {
		if k != model.KeyEncodingEnv && config.IsSecretName(k) {
			return config.MaskEnv(env)
		}
	}
	return env
}
