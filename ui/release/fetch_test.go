package release

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"svc/ui"
)

// packedEmbedded returns the embedded bundle as its release archive.
func packedEmbedded(t *testing.T) []byte {
	t.Helper()
	tarPath, _, err := Pack(ui.EmbeddedTag, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(tarPath)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// Pack, host on a mirror, fetch: the cache holds the embedded tree; later
// fetches are served from the cache with the mirror gone.
func TestPackFetchRoundTripAndOfflineReuse(t *testing.T) {
	t.Parallel()
	m := newMirror(t)
	m.release(ui.EmbeddedTag, packedEmbedded(t))
	cache := filepath.Join(t.TempDir(), "cache")
	opts := FetchOptions{Repo: m.repo() + "/", Tag: ui.EmbeddedTag, CacheDir: cache}

	dir, err := Fetch(t.Context(), opts)
	if err != nil {
		t.Fatalf("Fetch: %v", err)
	}
	if dir != filepath.Join(cache, ui.EmbeddedTag) {
		t.Errorf("Fetch = %s, want <cache>/%s", dir, ui.EmbeddedTag)
	}
	assertSameTree(t, ui.Embedded(), dir, ui.EmbeddedTag)
	if st, _ := os.Stat(cache); st.Mode().Perm() != 0o700 {
		t.Errorf("cache dir mode %v, want 0700", st.Mode().Perm())
	}
	entries, _ := os.ReadDir(cache)
	if len(entries) != 1 {
		t.Errorf("cache holds %d entries after a fetch, want only the tag", len(entries))
	}

	m.Close()
	again, err := Fetch(t.Context(), opts)
	if err != nil || again != dir {
		t.Fatalf("Fetch with the mirror stopped = %s, %v; want the cached %s", again, err, dir)
	}
	archive := "/releases/" + ui.EmbeddedTag + "/" + ArchiveName(ui.EmbeddedTag)
	if n := m.hitCount(archive); n != 1 {
		t.Errorf("archive fetched %d times, want 1 (a cached tag is never fetched again)", n)
	}
}

func TestFetchErrors(t *testing.T) {
	t.Parallel()
	m := newMirror(t)
	good := buildArchive(t, bundleEntries("v2.0.0"))
	m.release("v2.0.0", good)
	m.put("/releases/v2.0.1/"+ArchiveName("v2.0.1")+".sha256", []byte("not a checksum\n"))
	m.put("/releases/v2.0.2/"+ArchiveName("v2.0.2")+".sha256", sumLine(good, "other.tar.gz"))
	m.release("v2.0.3", buildArchive(t, bundleEntries("v9.9.9")))
	m.release("v2.0.4", buildArchive(t, []entry{{name: "index.html", body: []byte("x")}, {name: "VERSION", body: []byte("v2.0.4")}}))
	cases := []struct {
		name string
		opts FetchOptions
		want string
	}{
		{"bad tag", FetchOptions{Repo: m.repo(), Tag: "2.0.0"}, "want the form vX.Y.Z"},
		{"tag with path", FetchOptions{Repo: m.repo(), Tag: "v2.0.0/../../x"}, "want the form vX.Y.Z"},
		{"no repo", FetchOptions{Tag: "v2.0.0"}, "no ui release repo"},
		{"repo not http", FetchOptions{Repo: "file:///srv/releases", Tag: "v2.0.0"}, "want an http:// or https:// URL"},
		{"missing release", FetchOptions{Repo: m.repo(), Tag: "v3.0.0"}, "status 404"},
		{"bad sum file", FetchOptions{Repo: m.repo(), Tag: "v2.0.1"}, "want a sha256sum line"},
		{"sum of another file", FetchOptions{Repo: m.repo(), Tag: "v2.0.2"}, `names "other.tar.gz"`},
		{"bundle of another tag", FetchOptions{Repo: m.repo(), Tag: "v2.0.3"}, `the bundle says it is "v9.9.9"`},
		{"not a bundle", FetchOptions{Repo: m.repo(), Tag: "v2.0.4"}, "has no 404.html"},
		{"password redacted", FetchOptions{Repo: strings.Replace(m.repo(), "http://", "http://ops:s3cret@", 1), Tag: "v3.0.0"}, "ops:xxxxx@"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.opts.CacheDir = t.TempDir()
			_, err := Fetch(t.Context(), tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Fetch error = %v, want one containing %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("error %q shows the repo password", err)
			}
			assertEmptyCache(t, tc.opts.CacheDir)
		})
	}
}

func TestFetchRedirects(t *testing.T) {
	t.Parallel()
	m := newMirror(t)
	m.release("v1.2.3", buildArchive(t, bundleEntries("v1.2.3")))
	// /hopN/... redirects to /hop(N-1)/..., /hop0/... to the real path.
	m.setHook(func(w http.ResponseWriter, r *http.Request) bool {
		p := r.URL.Path
		switch {
		case strings.HasPrefix(p, "/ftp/"):
			http.Redirect(w, r, "ftp://files.example/x", http.StatusFound)
		case strings.HasPrefix(p, "/hop"):
			n := p[4] - '0'
			rest := p[strings.Index(p[1:], "/")+1:]
			next := rest
			if n > 0 {
				next = "/hop" + string(rune('0'+n-1)) + rest
			}
			http.Redirect(w, r, next, http.StatusFound)
		default:
			return false
		}
		return true
	})
	cases := []struct {
		repo string
		want string // "" = success
	}{
		{m.URL + "/hop2/releases", ""}, // three redirects
		{m.URL + "/hop3/releases", "stopped after 3 redirects"},
		{m.URL + "/ftp/releases", `refused a redirect to a "ftp" URL`},
	}
	for _, tc := range cases {
		_, err := Fetch(t.Context(), FetchOptions{Repo: tc.repo, Tag: "v1.2.3", CacheDir: t.TempDir(), HTTPClient: &http.Client{}})
		if tc.want == "" && err != nil {
			t.Errorf("Fetch via %s = %v, want success", tc.repo, err)
		}
		if tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("Fetch via %s = %v, want an error containing %q", tc.repo, err, tc.want)
		}
	}
}

// A mirror that never answers does not hang the fetch.
func TestFetchTimesOut(t *testing.T) {
	t.Parallel()
	m := newMirror(t)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	m.setHook(func(w http.ResponseWriter, r *http.Request) bool {
		select {
		case <-release:
		case <-r.Context().Done():
		}
		return true
	})
	cache := t.TempDir()
	_, err := Fetch(t.Context(), FetchOptions{Repo: m.repo(), Tag: "v1.0.1", CacheDir: cache, Timeout: 50 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "deadline exceeded") {
		t.Fatalf("Fetch from a silent mirror = %v, want a deadline error", err)
	}
	assertEmptyCache(t, cache)
}

func TestDefaultCacheDir(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	xdg := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", xdg)
	if got := DefaultCacheDir(); got != filepath.Join(xdg, "svc-ui") {
		t.Errorf("DefaultCacheDir with XDG_CACHE_HOME = %s, want %s/svc-ui", got, xdg)
	}
	blocked := filepath.Join(t.TempDir(), "file")
	os.WriteFile(blocked, nil, 0o600)
	t.Setenv("XDG_CACHE_HOME", blocked) // a file: svc-ui cannot be created under it
	if got := DefaultCacheDir(); got != filepath.Join(home, ".cache", "svc-ui") {
		t.Errorf("DefaultCacheDir with an unusable XDG dir = %s, want $HOME/.cache/svc-ui", got)
	}
}
