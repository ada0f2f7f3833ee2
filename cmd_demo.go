package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"svc/ui"
	"svc/worker/build"
	"svc/worker/config"
	"svc/worker/demo"
	"svc/worker/executor"
	"svc/worker/gcfloor"
)

func cmdDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	ports := demo.Ports{}
	fs.IntVar(&ports.UI, "ui-port", 8080, "UI server port (127.0.0.1)")
	fs.IntVar(&ports.Ingress, "ingress-port", 8090, "HTTP ingress port (127.0.0.1)")
	fs.IntVar(&ports.Metrics, "metrics-port", 9090, "metrics exporter port (127.0.0.1)")
	logFormat := fs.String("log-format", "text", "log format: json or text")
	persistent := fs.Bool("persistent", false, "run the demo executor in mode persistent (long-lived processes, protocol v2)")
	exactlyOnce := fs.Bool("exactly-once", false, `consume with sources.kafka.delivery = "exactly_once": results, DLQ records and offsets commit in Kafka transactions`)
	if err := parseArgs(fs, args, stdout); err != nil {
		return err
	}
	log, err := newLogger(stderr, *logFormat, "info")
	if err != nil {
		return err
	}
	// The demo's executors are real processes too: their orphans are reaped.
	defer executor.StartReaper(log)()
	self, err := demo.Self()
	if err != nil {
		return fmt.Errorf("find own binary for the demo executor: %w", err)
	}
	dir, err := os.MkdirTemp("", "svc-demo-")
	if err != nil {
		return fmt.Errorf("create demo storage dir: %w", err)
	}
	defer os.RemoveAll(dir)
	cluster, err := demo.StartCluster()
	if err != nil {
		return err
	}
	defer cluster.Close()
	delivery := config.DeliveryAtLeastOnce
	if *exactlyOnce {
		delivery = config.DeliveryExactlyOnce
	}
	cfg := demo.Config(self, dir, ports, cluster.Brokers(), delivery)
	if *persistent {
		cfg.Executor.Mode = "persistent"
	}
	// The embedded UI release, staged under the demo's own folder: the UI
	// works with no network and leaves nothing behind.
	cfg.UI.Release.CacheDir = filepath.Join(dir, "ui-cache")
	cfg.Handler.UIPages = demoPages()
	if problems := cfg.Validate(); len(problems) > 0 {
		return &config.Error{Path: "(demo)", Problems: problems}
	}
	go func() { _ = cluster.Trickle(ctx, 2*time.Second) }()
	defer gcfloor.Start(gcfloor.MinGoal)()
	w, err := build.New(ctx, cfg, productionOptions(log))
	if err != nil {
		return err
	}
	uiAddr, ingress := w.UIAddr(), w.IngressAddr()
	fmt.Fprintf(stdout, `
svc demo is running (Ctrl-C to stop)
  kafka        embedded cluster, brokers %s
               demo-in -> exec-demo -> demo-out (failures -> demo-in_dlq)
               a sample every 2s: one in five fails into the DLQ, one in five is retried once, then succeeds
  UI           http://%s/   (JSON API under /api/v1)
  metrics      http://%s/metrics
  try it:      curl -s -H 'Authorization: Bearer %s' --data-binary 'hello world' http://%s/v1/process
  a failure:   curl -s -H 'Authorization: Bearer %s' --data-binary 'please fail' http://%s/v1/process
  redrive:     curl -s -X POST http://%s/api/v1/debug/dlq/redrive -d '{"from_ts":0}'
               (a dry run: what each DLQ record would do now; add "dry_run":false to send them back to demo-in)

`, strings.Join(cluster.Brokers(), ","), uiAddr, w.Metrics.Addr(), demo.IngressToken, ingress, demo.IngressToken, ingress, uiAddr)
	return w.Run(ctx)
}

// demoPages declares one page of the demo's own, so the first run shows a
// handler's page next to the built-in ones.
func demoPages() []ui.Page {
	return []ui.Page{{Slug: "summaries", Title: "Summaries", Widgets: []ui.Widget{
		{Title: "Tasks processed", View: ui.ViewStat, Format: "number", Source: ui.Source{Kind: ui.SourceMetrics, Metric: "svc_tasks_total"}},
		{Title: "Last outcome", View: ui.ViewBadge, Field: "status", BadgeColors: map[string]string{"ok": "green", "failed": "red", "timeout": "yellow"},
			Source: ui.Source{Kind: ui.SourceTasks, Limit: ui.Limit(1)}},
		{Title: "Executor summaries", View: ui.ViewTable, Source: ui.Source{Kind: ui.SourceAnnotations, KindPrefix: "demo.", Limit: ui.Limit(100)},
			Columns: ui.Columns{{Name: "ts", Label: "When", Format: "timestamp"}, {Name: "bytes", Format: "bytes"}, {Name: "words", Format: "number"}}},
	}}}
}
