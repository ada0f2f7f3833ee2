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

	"svc/worker"
	"svc/worker/demo"
	"svc/worker/executor"
)

const usage = `usage: svc <command> [flags]

commands:
  run   -config FILE     run the worker (config also from $SVC_CONFIG)
  check -config FILE     validate a config and print it with secrets masked
  demo                   run a self-contained demo on 127.0.0.1
  ui    pack|fetch ...   pack the embedded UI release or fetch one into the
                         per-host cache (also as svc-ui; svc ui help)
  version                print the release
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop() // a second signal now ends the process at once
	}()
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
		err = cmdRun(ctx, rest, stderr)
	case "check":
		err = cmdCheck(rest, stdout)
	case "demo":
		err = cmdDemo(ctx, rest, stdout, stderr)
	case "ui":
		return runUI(ctx, "svc ui", rest, stdout, stderr)
	case "version":
		fmt.Fprintln(stdout, worker.Version)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
	default:
		fmt.Fprintf(stderr, "svc: unknown command %q\n%s", cmd, usage)
		return 2
	}
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(stderr, "svc %s: %v\n", cmd, err)
		}
		return 1
	}
	return 0
}

// runUI runs the UI release commands and returns their exit code.
func runUI(ctx context.Context, name string, args []string, stdout, stderr io.Writer) int {
	if err := cmdUI(ctx, args, stdout, stderr); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return uiExitCode(err)
	}
	return 0
}

type commonFlags struct {
	config    string
	logFormat string
	logLevel  string
	// svc run only: profiles of the whole run (see docs/operations.md
	// "Profiling").
	cpuProfile string
	memProfile string
	traceFile  string
}

func parseFlags(name string, args []string, stderr io.Writer) (commonFlags, error) {
	var f commonFlags
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.config, "config", os.Getenv("SVC_CONFIG"), "config file (TOML)")
	fs.StringVar(&f.logFormat, "log-format", "json", "log format: json or text")
	fs.StringVar(&f.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	if name == "run" {
		fs.StringVar(&f.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to this file (go tool pprof)")
		fs.StringVar(&f.memProfile, "memprofile", "", "write an allocation profile to this file at exit (go tool pprof)")
		fs.StringVar(&f.traceFile, "trace", "", "write a runtime execution trace of the whole run to this file (go tool trace)")
	}
	err := fs.Parse(args)
	return f, err
}

func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("-log-level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("-log-format %q: want json or text", format)
}
