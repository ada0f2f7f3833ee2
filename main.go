// Command svc is a message-processing worker: Kafka and HTTP in, an external
// executor per message, Kafka sinks and a DLQ out, with an operator UI,
// a metrics exporter and a flight recorder.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"svc/ui/release"
	"svc/worker"
	"svc/worker/demo"
	"svc/worker/executor"
)

const usage = `usage: svc <command> [flags]

commands:
  run     -config FILE   run the worker (config also from $SVC_CONFIG)
  check   -config FILE   validate a config and print it with secrets masked
  health  [-config FILE | -url URL]
                         GET the worker's /readyz: exit 0 when ready, 1 when
                         not (a container HEALTHCHECK; config also from
                         $SVC_CONFIG)
  demo                   run a self-contained demo on 127.0.0.1
  ui      pack|fetch ... pack the embedded UI release or fetch one into the
                         per-host cache (also as svc-ui; svc ui help)
  version                print the release (also svc --version)

Every command takes -h. Exit codes: 0 done, 1 runtime error (an invalid
config, a bind failure, a worker that failed or is not ready), 2 usage error.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop() // a second signal now ends the process at once
	}()
	// SIGHUP never ends the process by default: `svc run` logs it, `svc
	// demo` stops as on SIGINT.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGHUP)
	os.Exit(run(ctx, os.Args, os.Stdin, os.Stdout, os.Stderr))
}

// run dispatches a subcommand and returns the process exit code.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if filepath.Base(args[0]) == "svc-exec-demo" || (len(args) > 1 && args[1] == "exec-demo") {
		return demo.Execute(stdin, stdout, stderr, os.NewFile(3, "events"))
	}
	if len(args) > 1 && args[1] == executor.GuardArg {
		return executor.RunGuard(stdin)
	}
	if filepath.Base(args[0]) == "svc-ui" {
		return runUI(ctx, "svc-ui", args[1:], stdout, stderr)
	}
	if len(args) < 2 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	cmd, rest := args[1], args[2:]
	var err error
	switch cmd {
	case "run":
		err = cmdRun(ctx, rest, stdout, stderr)
	case "check":
		err = cmdCheck(rest, stdout)
	case "health":
		err = cmdHealth(ctx, rest, stdout, stderr)
	case "demo":
		hup, stop := signal.NotifyContext(ctx, syscall.SIGHUP)
		defer stop()
		err = cmdDemo(hup, rest, stdout, stderr)
	case "ui":
		return runUI(ctx, "svc ui", rest, stdout, stderr)
	case "version", "-version", "--version":
		err = cmdVersion(rest, stdout)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
	default:
		fmt.Fprintf(stderr, "svc: unknown command %q\n%s", cmd, usage)
		return 2
	}
	return exitCode(cmd, err, stderr)
}

// exitCode prints err (unless it was logged already) and maps it to the
// exit code: 0 for none or a -h, 2 for a usage error, else 1.
func exitCode(cmd string, err error, stderr io.Writer) int {
	var usageErr *usageError
	var logged *loggedError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &usageErr):
		fmt.Fprintf(stderr, "svc %s: %v\n(svc %s -h lists its flags)\n", cmd, err, cmd)
		return 2
	case errors.As(err, &logged):
		return 1
	}
	fmt.Fprintf(stderr, "svc %s: %v\n", cmd, err)
	return 1
}

// runUI runs the UI release commands and returns their exit code.
func runUI(ctx context.Context, name string, args []string, stdout, stderr io.Writer) int {
	if err := cmdUI(ctx, args, stdout, stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		if errors.Is(err, release.ErrUsage) {
			return 2
		}
		return 1
	}
	return 0
}

// usageError is a mistake in the command line: exit code 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usageErrorf(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// loggedError is an error the command has logged already: exit code 1.
type loggedError struct{ err error }

func (e *loggedError) Error() string { return e.err.Error() }
func (e *loggedError) Unwrap() error { return e.err }

// parseArgs parses args into fs: -h prints the flags to stdout and returns
// flag.ErrHelp; a bad flag or a stray argument is a usage error.
func parseArgs(fs *flag.FlagSet, args []string, stdout io.Writer) error {
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stdout)
			fmt.Fprintf(stdout, "usage: svc %s [flags]\n\nflags:\n", fs.Name())
			fs.PrintDefaults()
			return flag.ErrHelp
		}
		return &usageError{msg: err.Error()}
	}
	if fs.NArg() > 0 {
		return usageErrorf("unexpected argument %q", fs.Arg(0))
	}
	return nil
}

// cmdVersion prints the release: `svc version`, `svc --version`.
func cmdVersion(args []string, stdout io.Writer) error {
	if err := parseArgs(flag.NewFlagSet("version", flag.ContinueOnError), args, stdout); err != nil {
		return err
	}
	fmt.Fprintln(stdout, worker.Version)
	return nil
}

type commonFlags struct {
	config    string
	logFormat string
	logLevel  string
	// svc run only (docs/operations.md "Profiling").
	cpuProfile string
	memProfile string
	traceFile  string
}

func parseFlags(name string, args []string, stdout io.Writer) (commonFlags, error) {
	var f commonFlags
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.StringVar(&f.config, "config", os.Getenv("SVC_CONFIG"), "config file (TOML); default $SVC_CONFIG")
	fs.StringVar(&f.logFormat, "log-format", "json", "log format: json or text")
	fs.StringVar(&f.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	if name == "run" {
		fs.StringVar(&f.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to this file (go tool pprof)")
		fs.StringVar(&f.memProfile, "memprofile", "", "write an allocation profile to this file at exit (go tool pprof)")
		fs.StringVar(&f.traceFile, "trace", "", "write a runtime execution trace of the whole run to this file (go tool trace)")
	}
	err := parseArgs(fs, args, stdout)
	if err == nil && f.config == "" {
		err = usageErrorf("-config FILE (or SVC_CONFIG) is required")
	}
	return f, err
}

func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, usageErrorf("-log-level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	}
	return nil, usageErrorf("-log-format %q: want json or text", format)
}
