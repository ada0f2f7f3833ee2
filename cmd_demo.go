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

	"svc/httpd/root"
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
	self, err := os.Executable()
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
	// The embedded UI release, staged in the demo's folder (no network).
	cfg.UI.Release.CacheDir = filepath.Join(dir, "ui-cache")
	cfg.Handler.UIPages = demoPages()
	if problems := append(cfg.Validate(), root.CheckUI(cfg)...); len(problems) > 0 {
		return &config.Error{Path: "(demo)", Problems: problems}
	}
	go func() { _ = cluster.Trickle(ctx, 2*time.Second) }()
	defer gcfloor.Start(gcfloor.MinGoal)()
	w, err := root.New(ctx, cfg, productionOptions(log))
	if err != nil {
		return err
	}
	uiAddr, ingress := w.UIAddr(), w.IngressAddr()
	fmt.Fprintf(stdout, `
svc demo is running (Ctrl-C to stop)
  kafka        embedded cluster, brokers %s
               demo-in -> exec-demo -> demo-out (failures -> demo-in_dlq)
               a sample every 2s; of every six, one fails into the DLQ, one is retried once, then succeeds,
               and one (an order in %s) fails into the DLQ until you fix the executor (below)
  UI           http://%s/   (JSON API under /api/v1)
  metrics      http://%s/metrics
  try it:      curl -s -H 'Authorization: Bearer %s' --data-binary 'hello world' http://%s/v1/process
  a failure:   curl -s -H 'Authorization: Bearer %s' --data-binary 'please fail' http://%s/v1/process
  the fix:     touch %s
               (orders in %s succeed from then on; redrive those in the DLQ: http://%s/debug?tab=dlq)
  redrive:     curl -s -X POST http://%s/api/v1/debug/dlq/redrive -d '{"from_ts":0}'
               (a dry run: what each DLQ record would do now; add "dry_run":false to send them back to demo-in)

`, strings.Join(cluster.Brokers(), ","), demo.FixCurrency, uiAddr, w.Metrics.Addr(), demo.IngressToken, ingress, demo.IngressToken, ingress,
		demo.FixFile(dir), demo.FixCurrency, uiAddr, uiAddr)
	return w.Run(ctx)
}

// demoPages declares a page of the demo's own, as [[handler.ui_pages]]
// tables.
func demoPages() []map[string]any {
	type table = map[string]any
	return []table{{"slug": "summaries", "title": "Summaries", "widgets": []table{
		{"title": "Tasks processed", "view": "stat", "format": "number", "source": table{"kind": "metrics", "metric": "svc_tasks_total"}},
		{"title": "Last outcome", "view": "badge", "field": "status", "badge_colors": table{"ok": "green", "failed": "red", "timeout": "yellow"},
			"source": table{"kind": "tasks", "limit": 1}},
		{"title": "Executor summaries", "view": "table", "source": table{"kind": "annotations", "kind_prefix": "demo.", "limit": 100},
			"columns": []table{{"name": "ts", "label": "When", "format": "timestamp"}, {"name": "bytes", "format": "bytes"}, {"name": "words", "format": "number"}}},
	}}}
}
