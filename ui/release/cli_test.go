package release

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"svc/ui"
)

func runCLI(t *testing.T, d CLIDefaults, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := RunCLI(t.Context(), args, &out, &errOut, d)
	return out.String(), errOut.String(), err
}

func TestCLIPackThenFetchFromTheMirror(t *testing.T) {
	t.Parallel()
	out := t.TempDir()
	stdout, _, err := runCLI(t, CLIDefaults{}, "pack", "--version="+ui.EmbeddedTag, "-out", out)
	if err != nil {
		t.Fatalf("svc ui pack: %v", err)
	}
	if !strings.Contains(stdout, ArchiveName(ui.EmbeddedTag)+".sha256") {
		t.Errorf("pack output = %q, want both paths", stdout)
	}
	// Host the packed files the way an operator would, then fetch them.
	m := newMirror(t)
	for _, name := range []string{ArchiveName(ui.EmbeddedTag), ArchiveName(ui.EmbeddedTag) + ".sha256"} {
		b, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		m.put("/releases/"+ui.EmbeddedTag+"/"+name, b)
	}
	cache := t.TempDir()
	dir, err := Fetch(t.Context(), FetchOptions{Repo: m.repo(), Tag: ui.EmbeddedTag, CacheDir: cache})
	if err != nil {
		t.Fatalf("Fetch of the packed release: %v", err)
	}
	assertSameTree(t, ui.Embedded(), dir, ui.EmbeddedTag)
}

func TestCLIFetch(t *testing.T) {
	t.Parallel()
	m := newMirror(t)
	m.release("v1.5.0", buildArchive(t, bundleEntries("v1.5.0")))
	cache := t.TempDir()

	stdout, _, err := runCLI(t, CLIDefaults{}, "fetch", "--version", "v1.5.0", "-repo", m.repo(), "-cache-dir", cache)
	if err != nil || !strings.Contains(stdout, "fetched v1.5.0 into "+filepath.Join(cache, "v1.5.0")) {
		t.Fatalf("fetch = %q, %v", stdout, err)
	}
	m.Close()
	stdout, _, err = runCLI(t, CLIDefaults{}, "fetch", "--version=v1.5.0", "--cache-dir="+cache)
	if err != nil || !strings.Contains(stdout, "already cached") {
		t.Errorf("fetch of a cached tag offline = %q, %v", stdout, err)
	}

	// Defaults come from the config; the embedded tag needs no network.
	cache2 := t.TempDir()
	stdout, _, err = runCLI(t, CLIDefaults{CacheDir: cache2, Repo: "http://127.0.0.1:1/none"}, "fetch")
	if err != nil || !strings.Contains(stdout, "staged "+ui.EmbeddedTag+" from this binary") {
		t.Errorf("fetch of the embedded tag = %q, %v", stdout, err)
	}
	_, _, err = runCLI(t, CLIDefaults{Tag: "v7.7.7", CacheDir: t.TempDir()}, "fetch")
	if err == nil || !strings.Contains(err.Error(), "no ui release repo") {
		t.Errorf("fetch with no repo = %v, want an error naming the repo", err)
	}
}

func TestCLIUsageErrors(t *testing.T) {
	t.Parallel()
	cases := [][]string{
		{},
		{"publish"},
		{"pack"},
		{"pack", "-out", t.TempDir(), "extra"},
		{"fetch", "--version", "1.2.3"},
		{"fetch", "--version"},
		{"fetch", "-bogus"},
		{"fetch", "-timeout", "0s", "--version", "v1.2.3"},
	}
	for _, args := range cases {
		_, stderr, err := runCLI(t, CLIDefaults{CacheDir: t.TempDir()}, args...)
		if !errors.Is(err, ErrUsage) {
			t.Errorf("svc ui %v = %v, want ErrUsage", args, err)
		}
		if (len(args) == 0 || args[0] == "publish") && !strings.Contains(stderr, "svc ui pack") {
			t.Errorf("svc ui %v printed no usage: %q", args, stderr)
		}
	}
	if _, _, err := runCLI(t, CLIDefaults{}, "pack", "--version", "v0.0.1", "-out", t.TempDir()); err == nil || errors.Is(err, ErrUsage) {
		t.Errorf("pack of a tag this binary does not embed = %v, want a refusal", err)
	}
	stdout, _, err := runCLI(t, CLIDefaults{}, "help")
	if err != nil || !strings.Contains(stdout, "svc ui fetch") {
		t.Errorf("svc ui help = %q, %v", stdout, err)
	}
}
