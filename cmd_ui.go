package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"svc/httpd"
	"svc/ui/release"
	"svc/worker"
	"svc/worker/config"
)

// cmdUI runs `svc ui [-config FILE] pack|fetch ...` (also `svc-ui ...`).
// The config file, from -config or $SVC_CONFIG, gives the defaults of
// ui.release.repo, version and cache_dir.
func cmdUI(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	path := os.Getenv("SVC_CONFIG")
	if len(args) > 0 {
		switch a := args[0]; {
		case a == "-config" || a == "--config":
			if len(args) < 2 {
				return fmt.Errorf("%w: -config needs a file", release.ErrUsage)
			}
			path, args = args[1], args[2:]
		case strings.HasPrefix(a, "-config=") || strings.HasPrefix(a, "--config="):
			_, path, _ = strings.Cut(a, "=")
			args = args[1:]
		}
	}
	var d release.CLIDefaults
	if path != "" {
		cfg, err := config.LoadFile(path)
		if err != nil {
			return err
		}
		r := cfg.UI.Release
		d = release.CLIDefaults{Repo: r.Repo, Tag: r.Version, CacheDir: r.CacheDir}
	}
	return release.RunCLI(ctx, args, stdout, stderr, d)
}

// newSite builds the pages handler of the UI server: the configured
// release from the per-host cache or, for the tag embedded in this binary,
// from the binary itself at once; anything else is fetched in the
// background by Site.Run while pages answer 503.
// newSite serves the configured UI release; peers, when set, lists the
// fleet's other workers (their UI origins) that Live pages may connect to.
func newSite(cfg *config.Config, app *worker.App, peers func() []string, log *slog.Logger) (*release.Site, error) {
	var slugs []string
	for _, p := range app.UIPages() {
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

// uiExitCode maps a `svc ui` error to the exit code: 2 for a usage error.
func uiExitCode(err error) int {
	if errors.Is(err, release.ErrUsage) {
		return 2
	}
	return 1
}
