package release

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"svc/ui"
)

// DefaultFetchTimeout bounds each request of a fetch, body included.
const DefaultFetchTimeout = 60 * time.Second

const maxRedirects = 3

// FetchOptions say which release to fetch, from where, into which cache.
type FetchOptions struct {
	Repo       string        // ui.release.repo: <Repo>/<Tag>/svc-ui-<Tag>.tar.gz[.sha256]
	Tag        string        // vX.Y.Z
	CacheDir   string        // "" means DefaultCacheDir()
	HTTPClient *http.Client  // nil means NewHTTPClient(); its redirect policy is replaced
	Timeout    time.Duration // per request; 0 means DefaultFetchTimeout
}

// NewHTTPClient returns the client releases are fetched with: unlike peer
// requests it honours the proxy environment (a mirror is often behind the
// site's proxy), and it follows at most 3 redirects, to http(s) URLs only.
func NewHTTPClient() *http.Client {
	return &http.Client{
		Transport: &http.Transport{
			Proxy:                 http.ProxyFromEnvironment,
			DialContext:           (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
			TLSHandshakeTimeout:   10 * time.Second,
			ResponseHeaderTimeout: 30 * time.Second,
			IdleConnTimeout:       30 * time.Second,
			ForceAttemptHTTP2:     true,
		},
		CheckRedirect: checkRedirect,
	}
}

func checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) > maxRedirects {
		return fmt.Errorf("stopped after %d redirects", maxRedirects)
	}
	if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
		return fmt.Errorf("refused a redirect to a %q URL", req.URL.Scheme)
	}
	return nil
}

// Fetch returns the cache directory of the release opts.Tag, downloading
// it first unless it is cached. The archive is verified against its
// .sha256, unpacked with the archive checks and published atomically; on
// any error the cache is unchanged.
func Fetch(ctx context.Context, opts FetchOptions) (string, error) {
	if err := ui.CheckTag(opts.Tag); err != nil {
		return "", err
	}
	cacheDir := opts.CacheDir
	if cacheDir == "" {
		cacheDir = DefaultCacheDir()
	}
	if dir, ok := CachedDir(cacheDir, opts.Tag); ok {
		return dir, nil
	}
	base, err := releaseURL(opts.Repo, opts.Tag)
	if err != nil {
		return "", err
	}
	f := fetcher{client: opts.HTTPClient, timeout: opts.Timeout}
	if f.client == nil {
		f.client = NewHTTPClient()
	} else {
		c := *f.client
		c.CheckRedirect = checkRedirect
		f.client = &c
	}
	if f.timeout <= 0 {
		f.timeout = DefaultFetchTimeout
	}
	fail := func(err error) (string, error) {
		return "", fmt.Errorf("fetch ui bundle %s: %w", opts.Tag, err)
	}

	archiveURL := base + "/" + ArchiveName(opts.Tag)
	var sumText bytes.Buffer
	if err := f.get(ctx, archiveURL+".sha256", &sumText, 4096); err != nil {
		return fail(err)
	}
	want, err := parseSum(sumText.String(), ArchiveName(opts.Tag))
	if err != nil {
		return fail(err)
	}
	if err := os.MkdirAll(cacheDir, 0o700); err != nil {
		return fail(err)
	}
	dl, err := os.CreateTemp(cacheDir, ".dl-"+opts.Tag+"-")
	if err != nil {
		return fail(err)
	}
	defer func() {
		dl.Close()
		os.Remove(dl.Name())
	}()
	h := sha256.New()
	if err := f.get(ctx, archiveURL, io.MultiWriter(dl, h), maxArchiveBytes); err != nil {
		return fail(err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		return fail(fmt.Errorf("%w: checksum mismatch: the archive's sha256 is %s, %s.sha256 says %s", ErrUnsafeArchive, got, ArchiveName(opts.Tag), want))
	}
	dir, err := install(cacheDir, opts.Tag, func(tmp string) error {
		if _, err := dl.Seek(0, io.SeekStart); err != nil {
			return err
		}
		return unpackArchive(dl, tmp)
	})
	if err != nil {
		return fail(err)
	}
	return dir, nil
}

// releaseURL returns <repo>/<tag> after checking repo is an http(s) URL.
func releaseURL(repo, tag string) (string, error) {
	if repo == "" {
		return "", errors.New("no ui release repo: set ui.release.repo or pass -repo")
	}
	u, err := url.Parse(repo)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("ui release repo %q: want an http:// or https:// URL", redact(repo))
	}
	return strings.TrimRight(repo, "/") + "/" + tag, nil
}

// redact hides a password in a URL for messages.
func redact(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		return u.Redacted()
	}
	return "(unparsable URL)"
}

type fetcher struct {
	client  *http.Client
	timeout time.Duration
}

// get copies the body of a 200 answer to w, refusing more than limit bytes.
func (f fetcher) get(ctx context.Context, rawURL string, w io.Writer, limit int64) error {
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return fmt.Errorf("get %s: %w", redact(rawURL), err)
	}
	resp, err := f.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // url.Error repeats the unredacted URL
		}
		return fmt.Errorf("get %s: %w", redact(rawURL), err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("get %s: status %s", redact(rawURL), resp.Status)
	}
	n, err := io.Copy(w, io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return fmt.Errorf("get %s: %w", redact(rawURL), err)
	}
	if n > limit {
		return fmt.Errorf("get %s: larger than %d bytes", redact(rawURL), limit)
	}
	return nil
}

// parseSum reads a sha256sum line: 64 hex digits, then optionally the file
// name (which must be name).
func parseSum(text, name string) (string, error) {
	fields := strings.Fields(text)
	if len(fields) == 0 || len(fields[0]) != 64 {
		return "", fmt.Errorf("%s.sha256: want a sha256sum line", name)
	}
	sum := strings.ToLower(fields[0])
	if _, err := hex.DecodeString(sum); err != nil {
		return "", fmt.Errorf("%s.sha256: want a sha256sum line", name)
	}
	if len(fields) > 1 && strings.TrimPrefix(fields[1], "*") != name {
		return "", fmt.Errorf("%s.sha256 names %q", name, fields[1])
	}
	return sum, nil
}
