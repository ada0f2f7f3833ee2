package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"svc/httpd/root"
	"svc/ui/release"
)

// cmdUI runs `svc ui [-config FILE] pack|fetch ...` (also `svc-ui ...`);
// the config gives the defaults of ui.release.repo, version and cache_dir.
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
		cfg, err := root.LoadConfig(path)
		if err != nil {
			return err
		}
		r := cfg.UI.Release
		d = release.CLIDefaults{Repo: r.Repo, Tag: r.Version, CacheDir: r.CacheDir}
	}
	return release.RunCLI(ctx, args, stdout, stderr, d)
}
