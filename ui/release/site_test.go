package release

import (
	"context"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"svc/ui"
)

// events records log messages and signals each one on a channel.
type events struct {
	mu   sync.Mutex
	msgs []string
	ch   chan string
}

func newEvents() *events { return &events{ch: make(chan string, 64)} }

func (e *events) Enabled(context.Context, slog.Level) bool { return true }
func (e *events) WithAttrs([]slog.Attr) slog.Handler       { return e }
func (e *events) WithGroup(string) slog.Handler            { return e }
func (e *events) Handle(_ context.Context, r slog.Record) error {
	e.mu.Lock()
	e.msgs = append(e.msgs, r.Message)
	e.mu.Unlock()
	select {
	case e.ch <- r.Message:
	default:
	}
	return nil
}

func (e *events) has(msg string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Contains(e.msgs, msg)
}

// unavailable stands in for the server's 503 answer.
var unavailable = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	http.Error(w, `{"error":"ui_bundle_missing"}`, http.StatusServiceUnavailable)
})

// The embedded tag serves at once, with no network, and Run stages it.
func TestSiteServesEmbeddedTagAndStagesIt(t *testing.T) {
	t.Parallel()
	cache := t.TempDir()
	ev := newEvents()
	s, err := NewSite(SiteOptions{Fetch: FetchOptions{CacheDir: cache, Repo: "http://127.0.0.1:1/unreachable"}, Unavailable: unavailable, Logger: slog.New(ev)})
	if err != nil {
		t.Fatal(err)
	}
	if w := serve(s, "GET", "/"); w.Code != 200 || s.Tag() != ui.EmbeddedTag {
		t.Fatalf("GET / before Run = %d, tag %q; want 200 from the embedded copy", w.Code, s.Tag())
	}
	if err := s.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, ok := CachedDir(cache, ui.EmbeddedTag); !ok || !ev.has("ui_bundle_staged") {
		t.Errorf("after Run: cached %v, events %v; want the embedded copy staged", ok, ev.msgs)
	}
	// The next start loads it from the cache.
	again, err := NewSite(SiteOptions{Fetch: FetchOptions{CacheDir: cache}, Unavailable: unavailable})
	if err != nil || serve(again, "GET", "/debug").Code != 200 {
		t.Fatalf("second NewSite = %v", err)
	}
}

// Another tag: 503 until the background fetch lands, then the pages; a
// failed fetch is logged and retried, never fatal.
func TestSiteFetchesInTheBackground(t *testing.T) {
	t.Parallel()
	m := newMirror(t)
	ev := newEvents()
	s, err := NewSite(SiteOptions{
		Fetch:       FetchOptions{Repo: m.repo(), Tag: "v2.1.0", CacheDir: t.TempDir()},
		Pages:       PagesOptions{Slugs: []string{"orders"}},
		Unavailable: unavailable, Logger: slog.New(ev),
	})
	if err != nil {
		t.Fatal(err)
	}
	s.retryFirst = 0
	w := serve(s, "GET", "/p/orders")
	if w.Code != http.StatusServiceUnavailable || s.Tag() != "" {
		t.Fatalf("GET before the fetch = %d, tag %q; want 503", w.Code, s.Tag())
	}
	assertSecurityHeaders(t, "503 page", w.Header())

	done := make(chan error, 1)
	go func() { done <- s.Run(t.Context()) }()
	for msg := range ev.ch { // the mirror has no release yet
		if msg == "ui_bundle_fetch_failed" {
			break
		}
	}
	m.release("v2.1.0", buildArchive(t, bundleEntries("v2.1.0", entry{name: "assets/app.js", body: []byte("v2")})))
	if err := <-done; err != nil {
		t.Fatalf("Run = %v", err)
	}
	if s.Tag() != "v2.1.0" || serve(s, "GET", "/p/orders").Code != 200 || serve(s, "GET", "/assets/v2.1.0/app.js").Body.String() != "v2" {
		t.Errorf("after the fetch: tag %q, pages not served from the fetched release", s.Tag())
	}
}

func TestSiteWithoutRepoStaysAPIOnly(t *testing.T) {
	t.Parallel()
	ev := newEvents()
	s, err := NewSite(SiteOptions{Fetch: FetchOptions{Tag: "v2.2.0", CacheDir: t.TempDir()}, Unavailable: unavailable, Logger: slog.New(ev)})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	if serve(s, "GET", "/").Code != http.StatusServiceUnavailable || !ev.has("ui_bundle_unavailable") {
		t.Errorf("no repo: want 503 and ui_bundle_unavailable, got events %v", ev.msgs)
	}
}

func TestSiteRunStopsWithItsContext(t *testing.T) {
	t.Parallel()
	m := newMirror(t) // never has the release
	ev := newEvents()
	s, err := NewSite(SiteOptions{Fetch: FetchOptions{Repo: m.repo(), Tag: "v2.3.0", CacheDir: t.TempDir()}, Unavailable: unavailable, Logger: slog.New(ev)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	<-ev.ch // first failure logged; Run now waits 30s before retrying
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run after cancel = %v, want nil", err)
	}
}

// A damaged cache entry never stops the worker.
func TestSiteDamagedCache(t *testing.T) {
	t.Parallel()
	cache := t.TempDir()
	dir := filepath.Join(cache, "v2.4.0")
	os.MkdirAll(filepath.Join(dir, "assets"), 0o700)
	for _, f := range []string{"index.html", "404.html"} {
		os.WriteFile(filepath.Join(dir, f), nil, 0o600)
	}
	os.WriteFile(filepath.Join(dir, "VERSION"), []byte("v2.4.0\n"), 0o600)
	os.Symlink("/etc/passwd", filepath.Join(dir, "assets", "x"))
	ev := newEvents()
	s, err := NewSite(SiteOptions{Fetch: FetchOptions{Tag: "v2.4.0", CacheDir: cache}, Unavailable: unavailable, Logger: slog.New(ev)})
	if err != nil {
		t.Fatalf("NewSite with a damaged cache = %v, want it to start", err)
	}
	if serve(s, "GET", "/").Code != http.StatusServiceUnavailable || !ev.has("ui_bundle_load_failed") {
		t.Errorf("damaged cache: want 503 and ui_bundle_load_failed, got %v", ev.msgs)
	}
}

func TestNewSiteRefusesBadOptions(t *testing.T) {
	t.Parallel()
	if _, err := NewSite(SiteOptions{Fetch: FetchOptions{Tag: "main"}, Unavailable: unavailable}); err == nil || !strings.Contains(err.Error(), "vX.Y.Z") {
		t.Errorf("NewSite(tag main) = %v, want a tag error", err)
	}
	if _, err := NewSite(SiteOptions{Fetch: FetchOptions{CacheDir: t.TempDir()}}); err == nil {
		t.Errorf("NewSite without Unavailable = nil error")
	}
}
