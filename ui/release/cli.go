package release

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"time"

	"svc/ui"
)

// ErrUsage marks a command line that could not be understood; main exits 2.
var ErrUsage = errors.New("usage")

// CLIDefaults are the values the config file gives `svc ui` commands.
type CLIDefaults struct {
	Repo       string       // ui.release.repo
	Tag        string       // ui.release.version; "" means ui.EmbeddedTag
	CacheDir   string       // ui.release.cache_dir; "" means DefaultCacheDir()
	HTTPClient *http.Client // nil means NewHTTPClient()
}

const cliUsage = `usage:
  svc ui pack  [--version vX.Y.Z] -out DIR
      write svc-ui-<tag>.tar.gz and its .sha256 from the bundle in this
      binary (%[1]s), to host on a release mirror under <repo>/<tag>/
  svc ui fetch [--version vX.Y.Z] [-repo URL] [-cache-dir DIR] [-timeout 60s]
      put a release into the per-host cache: the embedded copy for %[1]s,
      else downloaded from <repo>/<tag>/ and verified; a cached tag is kept
`

// RunCLI runs `svc ui <args>` (or `svc-ui <args>`): pack or fetch. Flags
// take one or two dashes and `--version=v1.2.3` or `--version v1.2.3`.
// Usage errors wrap ErrUsage; a -h after pack or fetch prints its flags and
// returns flag.ErrHelp.
func RunCLI(ctx context.Context, args []string, stdout, stderr io.Writer, d CLIDefaults) error {
	if len(args) == 0 {
		fmt.Fprintf(stderr, cliUsage, ui.EmbeddedTag)
		return fmt.Errorf("%w: svc ui needs a command: pack or fetch", ErrUsage)
	}
	switch args[0] {
	case "pack":
		return runPack(args[1:], stdout, stderr, d)
	case "fetch":
		return runFetch(ctx, args[1:], stdout, stderr, d)
	case "help", "-h", "-help", "--help":
		fmt.Fprintf(stdout, cliUsage, ui.EmbeddedTag)
		return nil
	}
	fmt.Fprintf(stderr, cliUsage, ui.EmbeddedTag)
	return fmt.Errorf("%w: unknown svc ui command %q", ErrUsage, args[0])
}

func parseFlags(flags *flag.FlagSet, args []string) error {
	if err := flags.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err // the flags were printed: do nothing more
		}
		return fmt.Errorf("%w: %v", ErrUsage, err)
	}
	if flags.NArg() > 0 {
		return fmt.Errorf("%w: unexpected argument %q", ErrUsage, flags.Arg(0))
	}
	return nil
}

func runPack(args []string, stdout, stderr io.Writer, d CLIDefaults) error {
	flags := flag.NewFlagSet("svc ui pack", flag.ContinueOnError)
	flags.SetOutput(stderr)
	tag := flags.String("version", ui.EmbeddedTag, "release tag to pack (must be the embedded one)")
	out := flags.String("out", "", "directory to write the archive and its checksum into")
	if err := parseFlags(flags, args); err != nil {
		return err
	}
	if *out == "" {
		return fmt.Errorf("%w: svc ui pack needs -out DIR", ErrUsage)
	}
	tarPath, sumPath, err := Pack(*tag, *out)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s\nwrote %s\nhost both under <ui.release.repo>/%s/\n", tarPath, sumPath, *tag)
	return nil
}

func runFetch(ctx context.Context, args []string, stdout, stderr io.Writer, d CLIDefaults) error {
	flags := flag.NewFlagSet("svc ui fetch", flag.ContinueOnError)
	flags.SetOutput(stderr)
	tag := flags.String("version", cmp.Or(d.Tag, ui.EmbeddedTag), "release tag vX.Y.Z")
	repo := flags.String("repo", d.Repo, "release URL prefix (default ui.release.repo)")
	cacheDir := flags.String("cache-dir", d.CacheDir, "per-host bundle cache (default ui.release.cache_dir, else the per-host default)")
	timeout := flags.Duration("timeout", DefaultFetchTimeout, "limit for each request")
	if err := parseFlags(flags, args); err != nil {
		return err
	}
	if err := ui.CheckTag(*tag); err != nil {
		return fmt.Errorf("%w: %v", ErrUsage, err)
	}
	if *timeout <= 0 || *timeout > time.Hour {
		return fmt.Errorf("%w: -timeout must be between 1ns and 1h", ErrUsage)
	}
	if *cacheDir == "" {
		*cacheDir = DefaultCacheDir()
	}
	if dir, ok := CachedDir(*cacheDir, *tag); ok {
		fmt.Fprintf(stdout, "%s is already cached in %s\n", *tag, dir)
		return nil
	}
	if *tag == ui.EmbeddedTag {
		dir, err := StageEmbedded(*cacheDir)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "staged %s from this binary into %s\n", *tag, dir)
		return nil
	}
	dir, err := Fetch(ctx, FetchOptions{Repo: *repo, Tag: *tag, CacheDir: *cacheDir, HTTPClient: d.HTTPClient, Timeout: *timeout})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "fetched %s into %s\n", *tag, dir)
	return nil
}
