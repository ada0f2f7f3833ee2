package release

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"testing/fstest"

	"svc/ui"
)

func embeddedPages(t *testing.T, opts PagesOptions) *Pages {
	t.Helper()
	p, err := NewPages(ui.Embedded(), ui.EmbeddedTag, opts)
	if err != nil {
		t.Fatalf("NewPages: %v", err)
	}
	return p
}

func serve(h http.Handler, method, target string, hdr ...string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, target, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Set(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// assertSecurityHeaders checks the headers every page response carries.
func assertSecurityHeaders(t *testing.T, what string, h http.Header) {
	t.Helper()
	csp := h.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'none'", "script-src 'self'", "style-src 'self'", "connect-src 'self'", "frame-ancestors 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("%s: CSP %q lacks %q", what, csp, want)
		}
	}
	if strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "*") {
		t.Errorf("%s: CSP %q allows inline code or wildcards", what, csp)
	}
	if h.Get("X-Content-Type-Options") != "nosniff" || h.Get("Referrer-Policy") != "no-referrer" {
		t.Errorf("%s: nosniff / no-referrer missing: %v", what, h)
	}
}

func TestPagesRoutes(t *testing.T) {
	t.Parallel()
	p := embeddedPages(t, PagesOptions{Slugs: []string{"orders"}})
	assets := AssetsPath(ui.EmbeddedTag)
	cases := []struct {
		method, path string
		status       int
		cache        string
		ctype        string
		body         string
	}{
		{"GET", "/", 200, cacheShell, "text/html", assets + "/app.js"},
		{"GET", "/live", 200, cacheShell, "text/html", assets + "/style.css"},
		{"GET", "/workers", 200, cacheShell, "text/html", `id="nav"`},
		{"GET", "/history", 200, cacheShell, "text/html", `id="nav"`},
		{"GET", "/debug", 200, cacheShell, "text/html", `id="nav"`},
		{"GET", "/p/orders", 200, cacheShell, "text/html", `id="nav"`},
		{"HEAD", "/live", 200, cacheShell, "text/html", ""},
		{"GET", assets + "/app.js", 200, cacheAssets, "text/javascript", "import"},
		{"GET", assets + "/style.css", 200, cacheAssets, "text/css", "prefers-color-scheme"},
		{"GET", "/p/unknown", 404, cacheShell, "text/html", "Not found"},
		{"GET", "/p/", 404, cacheShell, "text/html", "Not found"},
		{"GET", "/p/orders/x", 404, cacheShell, "text/html", "Not found"},
		{"GET", "/live/", 404, cacheShell, "text/html", "Not found"},
		{"GET", "/nowhere", 404, cacheShell, "text/html", "Not found"},
		{"GET", "/index.html", 404, cacheShell, "text/html", "Not found"},
		{"GET", "/404.html", 404, cacheShell, "text/html", "Not found"},
		{"GET", "/assets/v0.9.0/app.js", 404, cacheShell, "text/html", "Not found"},
		{"GET", assets + "/", 404, cacheShell, "text/html", "Not found"},
		{"GET", assets, 404, cacheShell, "text/html", "Not found"},
		{"GET", assets + "/missing.js", 404, cacheShell, "text/html", "Not found"},
		{"GET", assets + "/../../index.html", 404, cacheShell, "text/html", "Not found"},
		{"GET", assets + "/./app.js", 404, cacheShell, "text/html", "Not found"},
		{"GET", assets + "//app.js", 404, cacheShell, "text/html", "Not found"},
		{"HEAD", "/nowhere", 404, cacheShell, "text/html", ""},
		{"POST", "/", 405, "", "", ""},
		{"DELETE", assets + "/app.js", 405, "", "", ""},
	}
	for _, tc := range cases {
		w := serve(p, tc.method, tc.path)
		what := tc.method + " " + tc.path
		if w.Code != tc.status {
			t.Errorf("%s = %d, want %d", what, w.Code, tc.status)
		}
		assertSecurityHeaders(t, what, w.Header())
		if got := w.Header().Get("Cache-Control"); tc.cache != "" && got != tc.cache {
			t.Errorf("%s Cache-Control = %q, want %q", what, got, tc.cache)
		}
		if got := w.Header().Get("Content-Type"); !strings.HasPrefix(got, tc.ctype) {
			t.Errorf("%s Content-Type = %q, want %s", what, got, tc.ctype)
		}
		body := w.Body.String()
		if !strings.Contains(body, tc.body) || strings.Contains(body, assetsPlaceholder) {
			t.Errorf("%s body lacks %q or keeps the placeholder:\n%.300s", what, tc.body, body)
		}
		if tc.method == "HEAD" && body != "" {
			t.Errorf("%s has a body", what)
		}
		if tc.status == 405 && w.Header().Get("Allow") != "GET, HEAD" {
			t.Errorf("%s Allow = %q", what, w.Header().Get("Allow"))
		}
	}
}

// Every script, style and module import the shells reference is served,
// and no shell carries inline code the CSP would block.
func TestShellReferencesResolve(t *testing.T) {
	t.Parallel()
	p := embeddedPages(t, PagesOptions{})
	ref := regexp.MustCompile(`(?:src|href)="(/assets/[^"]+)"`)
	imp := regexp.MustCompile(`from "\./([^"]+)"`)
	inline := regexp.MustCompile(`<script(?:\s+type="module")?>|<style|\sstyle="|\son[a-z]+="`)
	pages := map[string]string{"shell": serve(p, "GET", "/").Body.String(), "not found": serve(p, "GET", "/x").Body.String(), "sign-in": string(SignInPage(ui.EmbeddedTag, true, nil))}
	seen := 0
	for name, html := range pages {
		if inline.MatchString(html) {
			t.Errorf("%s page has inline code: %s", name, inline.FindString(html))
		}
		for _, m := range ref.FindAllStringSubmatch(html, -1) {
			seen++
			w := serve(p, "GET", m[1])
			if w.Code != 200 {
				t.Errorf("%s page references %s, which answers %d", name, m[1], w.Code)
				continue
			}
			for _, im := range imp.FindAllStringSubmatch(w.Body.String(), -1) {
				target := filepath.Dir(m[1]) + "/" + im[1]
				if c := serve(p, "GET", target).Code; c != 200 {
					t.Errorf("%s imports %s, which answers %d", m[1], target, c)
				}
			}
		}
	}
	if seen < 5 {
		t.Errorf("found %d asset references in the shells, want at least 5", seen)
	}
}

func TestPagesShellRevalidates(t *testing.T) {
	t.Parallel()
	p := embeddedPages(t, PagesOptions{})
	first := serve(p, "GET", "/")
	etag := first.Header().Get("ETag")
	if etag == "" {
		t.Fatal("shell has no ETag")
	}
	if w := serve(p, "GET", "/live", "If-None-Match", etag); w.Code != http.StatusNotModified {
		t.Errorf("GET /live with the shell's ETag = %d, want 304", w.Code)
	}
}

func TestPagesConnectSources(t *testing.T) {
	t.Parallel()
	peers := []string{"http://w2.internal:8080", "https://w3.example", "javascript:alert(1)", "http://w4/path", "http://w5; script-src *", "http://u:p@w6"}
	p := embeddedPages(t, PagesOptions{ConnectSources: func() []string { return peers }})
	csp := serve(p, "GET", "/live").Header().Get("Content-Security-Policy")
	if !strings.Contains(csp, "connect-src 'self' http://w2.internal:8080 ws://w2.internal:8080 https://w3.example wss://w3.example;") {
		t.Errorf("CSP = %q, want the two valid peers with their ws forms and nothing else", csp)
	}
	for _, bad := range []string{"javascript", "w4", "w5", "w6"} {
		if strings.Contains(csp, bad) {
			t.Errorf("CSP %q contains the invalid source %s", csp, bad)
		}
	}
}

// Only regular, non-hidden files of the bundle are ever served.
func TestPagesPathSafety(t *testing.T) {
	t.Parallel()
	fsys := fstest.MapFS{
		"index.html":          {Data: []byte("shell %SVC_ASSETS%")},
		"404.html":            {Data: []byte("nf")},
		"VERSION":             {Data: []byte("v3.0.0")},
		".env":                {Data: []byte("SECRET=1")},
		"assets/app.js":       {Data: []byte("ok")},
		"assets/.secret":      {Data: []byte("no")},
		"assets/.git/config":  {Data: []byte("no")},
		"assets/sub/deep.svg": {Data: []byte("<svg/>")},
		"private/key.pem":     {Data: []byte("no")},
	}
	p, err := NewPages(fsys, "v3.0.0", PagesOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if b := serve(p, "GET", "/").Body.String(); b != "shell /assets/v3.0.0" {
		t.Errorf("shell = %q", b)
	}
	for path, want := range map[string]int{
		"/assets/v3.0.0/app.js": 200, "/assets/v3.0.0/sub/deep.svg": 200,
		"/assets/v3.0.0/.secret": 404, "/assets/v3.0.0/.git/config": 404, "/.env": 404,
		"/assets/v3.0.0/../.env": 404, "/private/key.pem": 404, "/assets/v3.0.0/../private/key.pem": 404,
		"/assets/v3.0.0/sub": 404, "/assets/v3.0.0/sub/": 404, "/VERSION": 404,
	} {
		if got := serve(p, "GET", path).Code; got != want {
			t.Errorf("GET %s = %d, want %d", path, got, want)
		}
	}
	if ct := serve(p, "GET", "/assets/v3.0.0/sub/deep.svg").Header().Get("Content-Type"); ct != "image/svg+xml" {
		t.Errorf("svg Content-Type = %q", ct)
	}
}

func TestNewPagesRefusesBadBundles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "index.html"), []byte("x"), 0o600)
	os.WriteFile(filepath.Join(dir, "404.html"), []byte("x"), 0o600)
	os.Mkdir(filepath.Join(dir, "assets"), 0o700)
	os.Symlink("/etc/passwd", filepath.Join(dir, "assets", "passwd"))
	cases := map[string]struct {
		fsys fstest.MapFS
		dir  string
		tag  string
		want string
	}{
		"no shell":       {fsys: fstest.MapFS{"404.html": {}}, tag: "v1.0.0", want: "want index.html and 404.html"},
		"no not-found":   {fsys: fstest.MapFS{"index.html": {}}, tag: "v1.0.0", want: "want index.html and 404.html"},
		"bad tag":        {fsys: fstest.MapFS{}, tag: "latest", want: "want the form vX.Y.Z"},
		"symlink inside": {dir: dir, tag: "v1.0.0", want: "assets/passwd is not a regular file"},
	}
	for name, tc := range cases {
		var err error
		if tc.dir != "" {
			_, err = NewPages(os.DirFS(tc.dir), tc.tag, PagesOptions{})
		} else {
			_, err = NewPages(tc.fsys, tc.tag, PagesOptions{})
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: NewPages = %v, want an error containing %q", name, err, tc.want)
		}
	}
}

func TestWriteSignIn(t *testing.T) {
	t.Parallel()
	p := embeddedPages(t, PagesOptions{})
	for _, tc := range []struct {
		tag    string
		failed bool
	}{{ui.EmbeddedTag, false}, {ui.EmbeddedTag, true}, {"", false}} {
		w := httptest.NewRecorder()
		WriteSignIn(w, httptest.NewRequest("GET", "/live?token=wrong", nil), tc.tag, tc.failed)
		body := w.Body.String()
		if w.Code != http.StatusUnauthorized || w.Header().Get("WWW-Authenticate") == "" || w.Header().Get("Cache-Control") != "no-store" {
			t.Errorf("WriteSignIn = %d %v, want 401 with WWW-Authenticate and no-store", w.Code, w.Header())
		}
		assertSecurityHeaders(t, "sign-in", w.Header())
		if !strings.Contains(body, `<form method="get">`) || !strings.Contains(body, `name="token"`) {
			t.Errorf("sign-in page lacks a GET form with a token field:\n%s", body)
		}
		if strings.Contains(body, "not accepted") != tc.failed {
			t.Errorf("sign-in page failed=%v shows the refusal: %v", tc.failed, !tc.failed)
		}
		script := AssetsPath(ui.EmbeddedTag) + "/signin.js"
		if strings.Contains(body, script) != (tc.tag != "") {
			t.Errorf("sign-in page with tag %q: script reference %v", tc.tag, !(tc.tag != ""))
		}
		if tc.tag != "" && serve(p, "GET", script).Code != 200 {
			t.Errorf("%s is not served", script)
		}
	}
}
