package release

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"svc/ui"
)

// Retry delays of a background fetch that failed: doubling, capped.
const (
	retryFirst = 30 * time.Second
	retryMax   = 10 * time.Minute
)

// SiteOptions configure a Site.
type SiteOptions struct {
	Fetch       FetchOptions // the release to serve; Tag "" means ui.EmbeddedTag
	Pages       PagesOptions
	Unavailable http.Handler // answers while no bundle is loaded
	Logger      *slog.Logger // ui_bundle_* events; nil discards them
}

// Site is the pages handler of a worker: it serves the configured release
// once one is loaded (by NewSite from the cache or the binary, else by Run
// in the background) and Unavailable until then.
type Site struct {
	opts       SiteOptions
	log        *slog.Logger
	pages      atomic.Pointer[Pages]
	retryFirst time.Duration
}

// NewSite checks the options and loads the release if it is already on
// this host. It starts no goroutine and makes no request.
func NewSite(opts SiteOptions) (*Site, error) {
	if opts.Fetch.Tag == "" {
		opts.Fetch.Tag = ui.EmbeddedTag
	}
	if err := ui.CheckTag(opts.Fetch.Tag); err != nil {
		return nil, err
	}
	if opts.Fetch.CacheDir == "" {
		opts.Fetch.CacheDir = DefaultCacheDir()
	}
	if opts.Unavailable == nil {
		return nil, errors.New("ui site: Unavailable handler is required")
	}
	s := &Site{opts: opts, log: opts.Logger, retryFirst: retryFirst}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	tag := opts.Fetch.Tag
	if dir, ok := CachedDir(opts.Fetch.CacheDir, tag); ok {
		err := s.load(dir, "cache")
		if err == nil {
			return s, nil
		}
		// A damaged cache never stops the worker.
		s.log.Warn("ui_bundle_load_failed", "tag", tag, "dir", dir, "error", err)
	}
	if tag == ui.EmbeddedTag {
		p, err := NewPages(ui.Embedded(), tag, opts.Pages)
		if err != nil {
			return nil, err
		}
		s.pages.Store(p)
		s.log.Info("ui_bundle_loaded", "tag", tag, "from", "embedded")
	}
	return s, nil
}

func (s *Site) load(dir, from string) error {
	p, err := NewPages(os.DirFS(dir), s.opts.Fetch.Tag, s.opts.Pages)
	if err != nil {
		return err
	}
	s.pages.Store(p)
	s.log.Info("ui_bundle_loaded", "tag", p.Tag(), "from", from, "dir", dir)
	return nil
}

// Run stages the embedded release into the cache, or fetches a missing
// one with backoff until it succeeds or ctx ends. Failures are logged,
// never returned; the worker stays API-only meanwhile.
func (s *Site) Run(ctx context.Context) error {
	rel := s.opts.Fetch
	if _, ok := CachedDir(rel.CacheDir, rel.Tag); ok {
		return nil
	}
	if rel.Tag == ui.EmbeddedTag {
		if dir, err := StageEmbedded(rel.CacheDir); err != nil {
			s.log.Warn("ui_bundle_stage_failed", "tag", rel.Tag, "cache_dir", rel.CacheDir, "error", err)
		} else {
			s.log.Info("ui_bundle_staged", "tag", rel.Tag, "dir", dir)
		}
		return nil
	}
	if rel.Repo == "" {
		s.log.Warn("ui_bundle_unavailable", "tag", rel.Tag, "cache_dir", rel.CacheDir,
			"reason", fmt.Sprintf("not cached and ui.release.repo is empty; stage it with `svc ui fetch --version=%s -repo URL`", rel.Tag))
		return nil
	}
	delay := s.retryFirst
	for {
		dir, err := Fetch(ctx, rel)
		if err == nil {
			if err = s.load(dir, "fetch"); err == nil {
				return nil
			}
		}
		if ctx.Err() != nil {
			return nil
		}
		s.log.Warn("ui_bundle_fetch_failed", "tag", rel.Tag, "repo", redact(rel.Repo), "error", err, "retry_in", delay.String())
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(delay):
		}
		delay = min(2*delay, retryMax)
	}
}

// Tag is the release tag being served, or "" while none is loaded.
func (s *Site) Tag() string {
	if p := s.pages.Load(); p != nil {
		return p.Tag()
	}
	return ""
}

// ServeHTTP serves the loaded release, or Unavailable.
func (s *Site) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if p := s.pages.Load(); p != nil {
		p.ServeHTTP(w, r)
		return
	}
	SetSecurityHeaders(w.Header(), nil)
	s.opts.Unavailable.ServeHTTP(w, r)
}
