package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"svc/httpd/root"
)

// cmdHealth runs `svc health`: one GET of the worker's /readyz, exit 0 on
// 200 and 1 otherwise (a HEALTHCHECK for images without curl).
func cmdHealth(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("health", flag.ContinueOnError)
	cfgPath := fs.String("config", os.Getenv("SVC_CONFIG"), "config file (TOML): GET /readyz on its UI address (ui.host, ui.port); default $SVC_CONFIG")
	url := fs.String("url", "", "GET this URL instead of the config's (e.g. http://127.0.0.1:8080/readyz)")
	timeout := fs.Duration("timeout", 5*time.Second, "limit for the request")
	if err := parseArgs(fs, args, stdout); err != nil {
		return err
	}
	if *timeout <= 0 {
		return usageErrorf("-timeout must be positive")
	}
	target := *url
	if target == "" {
		if *cfgPath == "" {
			return usageErrorf("-config FILE, SVC_CONFIG or -url URL is required")
		}
		cfg, err := root.LoadConfig(*cfgPath)
		if err != nil {
			return err
		}
		if !cfg.UI.Enabled {
			return errors.New("ui.enabled = false: the worker serves no /readyz (give -url to probe another one)")
		}
		target = "http://" + net.JoinHostPort(probeHost(cfg.UI.Host), strconv.Itoa(cfg.UI.Port)) + "/readyz"
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return usageErrorf("-url %q: %v", target, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("not ready: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	detail := strings.TrimSpace(string(body))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("not ready: GET %s: %s %s", target, resp.Status, detail)
	}
	fmt.Fprintf(stdout, "ready: GET %s: %s %s\n", target, resp.Status, detail)
	return nil
}

// probeHost is the local address of a server bound to host.
func probeHost(host string) string {
	switch strings.Trim(host, "[]") {
	case "", "0.0.0.0":
		return "127.0.0.1"
	case "::":
		return "::1"
	}
	return strings.Trim(host, "[]")
}
