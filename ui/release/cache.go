package release

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"svc/ui"
)

// The per-host cache holds one directory per tag, published by renaming a
// completed temporary directory into place and never replaced (tags are
// immutable), so processes may fill it at once: the first rename wins.

// staleAfter is the age of a temporary cache entry left by a dead process.
const staleAfter = time.Hour

// DefaultCacheDir returns the per-host bundle cache directory:
// $XDG_CACHE_HOME/svc-ui or /var/cache/svc-ui, created (0700) if need be,
// else $HOME/.cache/svc-ui when that cannot be written.
func DefaultCacheDir() string {
	primary := "/var/cache/svc-ui"
	if x := os.Getenv("XDG_CACHE_HOME"); x != "" {
		primary = filepath.Join(x, "svc-ui")
	}
	if writableDir(primary) {
		return primary
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".cache", "svc-ui")
	}
	return primary
}

func writableDir(dir string) bool {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return false
	}
	f, err := os.CreateTemp(dir, ".probe-")
	if err != nil {
		return false
	}
	f.Close()
	os.Remove(f.Name())
	return true
}

// CachedDir returns <cacheDir>/<tag> and whether a complete bundle of that
// tag is there.
func CachedDir(cacheDir, tag string) (string, bool) {
	dir := filepath.Join(cacheDir, tag)
	if ui.CheckTag(tag) != nil {
		return dir, false
	}
	return dir, checkBundleDir(dir, tag) == nil
}

// ErrNotCached means the cache holds no bundle of the tag asked for.
var ErrNotCached = errors.New("ui bundle not cached")

// checkBundleDir checks that dir holds a bundle of tag: both shells as
// regular files and a VERSION file naming the tag.
func checkBundleDir(dir, tag string) error {
	for _, f := range []string{shellFile, notFoundFile} {
		st, err := os.Lstat(filepath.Join(dir, f))
		if err != nil {
			return fmt.Errorf("%w: %s has no %s", ErrNotCached, dir, f)
		}
		if !st.Mode().IsRegular() {
			return fmt.Errorf("%w: %s in %s is not a regular file", ErrUnsafeArchive, f, dir)
		}
	}
	v, err := os.ReadFile(filepath.Join(dir, versionFile))
	if err != nil {
		return fmt.Errorf("%w: %s has no %s", ErrNotCached, dir, versionFile)
	}
	if got := string(bytes.TrimSpace(v)); got != tag {
		return fmt.Errorf("%w: the bundle says it is %q, not %s", ErrUnsafeArchive, got, tag)
	}
	return nil
}

// install publishes a bundle of tag into cacheDir: fill writes it into a
// temporary directory, which is checked and renamed to <tag> (another
// process's copy wins). On error nothing is left under the tag's name.
func install(cacheDir, tag string, fill func(tmp string) error) (string, error) {
	if err := os.MkdirAll(cacheDir, 0o700); err != nil {
		return "", fmt.Errorf("create ui cache: %w", err)
	}
	sweepStale(cacheDir)
	final, ok := CachedDir(cacheDir, tag)
	if ok {
		return final, nil
	}
	tmp, err := os.MkdirTemp(cacheDir, ".tmp-"+tag+"-")
	if err != nil {
		return "", fmt.Errorf("create ui cache entry: %w", err)
	}
	published := false
	defer func() {
		if !published {
			os.RemoveAll(tmp)
		}
	}()
	if err := fill(tmp); err != nil {
		return "", err
	}
	if err := checkBundleDir(tmp, tag); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, final); err != nil {
		if errors.Is(err, fs.ErrExist) {
			if _, ok := CachedDir(cacheDir, tag); ok {
				return final, nil // another process won the race
			}
		}
		return "", fmt.Errorf("publish ui bundle %s: %w", tag, err)
	}
	published = true
	return final, nil
}

// sweepStale removes temporary entries a crashed process left behind.
func sweepStale(cacheDir string) {
	entries, err := os.ReadDir(cacheDir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), ".tmp-") && !strings.HasPrefix(e.Name(), ".dl-") {
			continue
		}
		if info, err := e.Info(); err == nil && time.Since(info.ModTime()) > staleAfter {
			os.RemoveAll(filepath.Join(cacheDir, e.Name()))
		}
	}
}

// StageEmbedded unpacks the embedded bundle, with a fetched release's
// checks, into <cacheDir>/<ui.EmbeddedTag> unless it is there, and returns
// that directory.
func StageEmbedded(cacheDir string) (string, error) {
	var buf bytes.Buffer
	if err := writeArchive(&buf, ui.Embedded(), ui.EmbeddedTag); err != nil {
		return "", fmt.Errorf("stage embedded ui bundle: %w", err)
	}
	dir, err := install(cacheDir, ui.EmbeddedTag, func(tmp string) error {
		return unpackArchive(&buf, tmp)
	})
	if err != nil {
		return "", fmt.Errorf("stage embedded ui bundle: %w", err)
	}
	return dir, nil
}
