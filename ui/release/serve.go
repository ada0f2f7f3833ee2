package release

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"

	"svc/ui"
)

// assetsPlaceholder in the shells is replaced by the versioned asset path.
const assetsPlaceholder = "%SVC_ASSETS%"

// Cache-Control values: shells are revalidated, versioned assets never change.
const (
	cacheShell  = "no-cache"
	cacheAssets = "public, max-age=31536000, immutable"
)

// shellRoutes are the bundle's own pages; /p/<slug> adds declared ones.
var shellRoutes = map[string]bool{"/": true, "/live": true, "/workers": true, "/history": true, "/debug": true, "/lag": true}

// AssetsPath is the URL prefix of a release's static files, /assets/<tag>.
func AssetsPath(tag string) string { return "/assets/" + tag }

// IsAssetPath reports a static-file path, which the server answers without
// the UI token (a page opened with ?token= loads its scripts first).
func IsAssetPath(p string) bool { return strings.HasPrefix(p, "/assets/") }

// PagesOptions tune a Pages handler.
type PagesOptions struct {
	Slugs []string // the declared pages: /p/<slug> of any other is not found
	// ConnectSources returns the other origins pages may connect to (and
	// their ws(s) forms), e.g. the fleet's workers; nil: same origin only.
	ConnectSources func() []string
}

// Pages serves one release of the bundle from memory: the shell for the
// page routes, versioned static files, and the not-found page (404) for any
// other path.
type Pages struct {
	tag      string
	shell    []byte
	etag     string
	notFound []byte
	assets   map[string][]byte // by path under assets/
	slugs    map[string]bool
	connect  func() []string
}

// NewPages loads the bundle in fsys (index.html and 404.html at the root,
// static files under assets/) as release tag.
func NewPages(fsys fs.FS, tag string, opts PagesOptions) (*Pages, error) {
	if err := ui.CheckTag(tag); err != nil {
		return nil, err
	}
	p := &Pages{tag: tag, assets: map[string][]byte{}, slugs: map[string]bool{}, connect: opts.ConnectSources}
	for _, s := range opts.Slugs {
		p.slugs[s] = true
	}
	var files int
	var total int64
	err := fs.WalkDir(fsys, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || name == "." {
			return err
		}
		if strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return nil
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("%s is not a regular file", name)
		}
		if files++; files > MaxArchiveEntries {
			return fmt.Errorf("more than %d files", MaxArchiveEntries)
		}
		b, err := fs.ReadFile(fsys, name)
		if total += int64(len(b)); total > MaxUnpackedBytes {
			return fmt.Errorf("more than %d MiB", MaxUnpackedBytes>>20)
		}
		switch {
		case err != nil:
			return err
		case name == shellFile:
			p.shell = bytes.ReplaceAll(b, []byte(assetsPlaceholder), []byte(AssetsPath(tag)))
		case name == notFoundFile:
			p.notFound = bytes.ReplaceAll(b, []byte(assetsPlaceholder), []byte(AssetsPath(tag)))
		case strings.HasPrefix(name, assetsDir+"/"):
			p.assets[strings.TrimPrefix(name, assetsDir+"/")] = b
		}
		return nil
	})
	if err == nil && (p.shell == nil || p.notFound == nil) {
		err = fmt.Errorf("want %s and %s at its root", shellFile, notFoundFile)
	}
	if err != nil {
		return nil, fmt.Errorf("load ui bundle %s: %w", tag, err)
	}
	sum := sha256.Sum256(p.shell)
	p.etag = `"` + hex.EncodeToString(sum[:8]) + `"`
	return p, nil
}

// Tag is the release tag served.
func (p *Pages) Tag() string { return p.tag }

// ServeHTTP answers GET and HEAD; any other method gets 405.
func (p *Pages) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	SetSecurityHeaders(h, p.connectSources())
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		h.Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if p.isShellRoute(r.URL.Path) {
		h.Set("Content-Type", "text/html; charset=utf-8")
		h.Set("Cache-Control", cacheShell)
		h.Set("ETag", p.etag)
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(p.shell))
		return
	}
	if name, ok := strings.CutPrefix(r.URL.Path, AssetsPath(p.tag)+"/"); ok {
		if b, ok := p.assets[name]; ok {
			h.Set("Content-Type", contentType(name))
			h.Set("Cache-Control", cacheAssets)
			http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(b))
			return
		}
	}
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", cacheShell)
	w.WriteHeader(http.StatusNotFound)
	if r.Method == http.MethodGet {
		w.Write(p.notFound)
	}
}

func (p *Pages) isShellRoute(u string) bool {
	if shellRoutes[u] {
		return true
	}
	slug, ok := strings.CutPrefix(u, "/p/")
	return ok && p.slugs[slug]
}

func (p *Pages) connectSources() []string {
	if p.connect == nil {
		return nil
	}
	return p.connect()
}

// contentTypes maps the extensions a bundle uses; others are bytes.
var contentTypes = map[string]string{
	".js": "text/javascript; charset=utf-8", ".mjs": "text/javascript; charset=utf-8",
	".css": "text/css; charset=utf-8", ".html": "text/html; charset=utf-8",
	".json": "application/json", ".map": "application/json", ".svg": "image/svg+xml",
	".png": "image/png", ".ico": "image/x-icon", ".webp": "image/webp",
	".woff2": "font/woff2", ".txt": "text/plain; charset=utf-8",
}

func contentType(name string) string {
	if ct, ok := contentTypes[strings.ToLower(path.Ext(name))]; ok {
		return ct
	}
	return "application/octet-stream"
}

// SetSecurityHeaders sets the headers of every page response: a
// same-origin Content-Security-Policy (connections also to the given plain
// http(s) origins and their ws(s) forms), no framing, sniffing or referrer.
func SetSecurityHeaders(h http.Header, connect []string) {
	h.Set("Content-Security-Policy", csp(connect))
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
}

func csp(connect []string) string {
	src := "'self'"
	for _, o := range connect {
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
			(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil || strings.ContainsAny(u.Host, " ;,'\"") {
			continue
		}
		ws := "ws"
		if u.Scheme == "https" {
			ws = "wss"
		}
		src += " " + u.Scheme + "://" + u.Host + " " + ws + "://" + u.Host
	}
	return "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; font-src 'self'; " +
		"connect-src " + src + "; manifest-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
}
