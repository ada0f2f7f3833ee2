package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"svc/worker/workertest"
	"svc/worker/workertest/wait"
)

// svcCmd runs the built binary with args and no SVC_CONFIG in its
// environment; it returns the exit code, stdout and stderr. A command that
// is still running after 30 s (a demo started by mistake) is killed and
// fails the test.
func svcCmd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, svcBin, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SVC_CONFIG=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("svc %s still ran after 30 s: killed\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), &stdout, &stderr)
	}
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatalf("svc %v: %v", args, err)
	}
	return cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()
}

// TestCLIConventions: -h and --help exit 0 on every command, --version
// works, usage errors exit 2 and runtime errors 1 (docs/operations.md,
// "Commands and exit codes").
func TestCLIConventions(t *testing.T) {
	t.Parallel()
	valid := "testdata/config/valid/" + firstEntry(t, "testdata/config/valid")
	cases := []struct {
		name string
		args []string
		code int
		want string // in stdout and stderr together
	}{
		{"run -h", []string{"run", "-h"}, 0, "-config"},
		{"run --help", []string{"run", "--help"}, 0, "-log-format"},
		{"check -h", []string{"check", "-h"}, 0, "-config"},
		{"health -h", []string{"health", "-h"}, 0, "-url"},
		{"demo -h", []string{"demo", "-h"}, 0, "-ui-port"},
		{"ui -h", []string{"ui", "-h"}, 0, "svc ui fetch"},
		{"ui pack -h", []string{"ui", "pack", "-h"}, 0, "-out"},
		{"version -h", []string{"version", "-h"}, 0, "usage: svc version"},
		{"-h", []string{"-h"}, 0, "Exit codes"},
		{"help", []string{"help"}, 0, "health"},
		{"version", []string{"version"}, 0, "dev"},
		{"--version", []string{"--version"}, 0, "dev"},
		{"-version", []string{"-version"}, 0, "dev"},
		{"no command", nil, 2, "usage: svc"},
		{"unknown command", []string{"frobnicate"}, 2, `unknown command "frobnicate"`},
		{"run without -config", []string{"run"}, 2, "-config FILE (or SVC_CONFIG) is required"},
		{"run with an unknown flag", []string{"run", "-config", valid, "-bogus"}, 2, "flag provided but not defined: -bogus"},
		{"run with a stray argument", []string{"run", "-config", valid, "now"}, 2, `unexpected argument "now"`},
		{"run with a bad -log-format", []string{"run", "-config", valid, "-log-format", "xml"}, 2, `-log-format "xml"`},
		{"check without -config", []string{"check"}, 2, "-config FILE (or SVC_CONFIG) is required"},
		{"health without a target", []string{"health"}, 2, "-url URL is required"},
		{"demo with a stray argument", []string{"demo", "now"}, 2, `unexpected argument "now"`},
		{"ui with an unknown command", []string{"ui", "frobnicate"}, 2, "unknown svc ui command"},
		{"check of an invalid config", []string{"check", "-config", "testdata/config/invalid/" + firstEntry(t, "testdata/config/invalid")}, 1, "problem(s)"},
		{"run of a missing config", []string{"run", "-config", filepath.Join(t.TempDir(), "none.toml")}, 1, "no such file"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			code, stdout, stderr := svcCmd(t, c.args...)
			if code != c.code || !strings.Contains(stdout+stderr, c.want) {
				t.Errorf("svc %s = exit %d, want %d with %q\nstdout:\n%s\nstderr:\n%s", strings.Join(c.args, " "), code, c.code, c.want, stdout, stderr)
			}
			// Help goes to stdout (svc ui's own flag lists excepted):
			// `svc run -h | less` shows it.
			if c.code == 0 && c.args != nil && c.args[0] != "ui" && stdout == "" {
				t.Errorf("svc %s printed nothing on stdout; stderr:\n%s", strings.Join(c.args, " "), stderr)
			}
		})
	}
}

// TestHelpDoesNothingElse: `svc ui fetch -h` prints its flags and stages
// nothing (it used to go on and fill the cache).
func TestHelpDoesNothingElse(t *testing.T) {
	t.Parallel()
	cache := t.TempDir()
	code, stdout, stderr := svcCmd(t, "ui", "fetch", "-cache-dir", cache, "-h")
	if code != 0 || !strings.Contains(stderr, "-cache-dir") {
		t.Errorf("svc ui fetch -h = exit %d, want 0 with its flags\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if entries, _ := os.ReadDir(cache); len(entries) > 0 {
		t.Errorf("svc ui fetch -h staged %v into the cache, want nothing done", entries)
	}
}

// TestFatalErrorsInLogFormat: once svc run knows its log format, a fatal
// error is one log record in that format (a JSON pipeline keeps it), with
// the config's problems as a list; exit 1.
func TestFatalErrorsInLogFormat(t *testing.T) {
	t.Parallel()
	bad := workertest.WriteConfig(t, "[ui]\nport = 99999\n[executor]\nbinary_path = \"/bin/cat\"\npool_size = -1\n[sources.http]\nenabled = true\n")
	t.Run("json", func(t *testing.T) {
		t.Parallel()
		code, stdout, stderr := svcCmd(t, "run", "-config", bad)
		if code != 1 {
			t.Fatalf("exit = %d, want 1\n%s%s", code, stdout, stderr)
		}
		lines := strings.Split(strings.TrimSpace(stderr), "\n")
		var rec struct {
			Level    string   `json:"level"`
			Msg      string   `json:"msg"`
			Config   string   `json:"config"`
			Error    string   `json:"error"`
			Problems []string `json:"problems"`
		}
		for _, l := range lines {
			if err := json.Unmarshal([]byte(l), &rec); err != nil {
				t.Fatalf("stderr line %q is not JSON (%v); stderr:\n%s", l, err, stderr)
			}
		}
		problems := strings.Join(rec.Problems, "\n")
		if rec.Msg != "startup_failed" || rec.Level != "ERROR" || rec.Config != bad ||
			!strings.Contains(problems, "ui.port") || !strings.Contains(problems, "executor.pool_size") {
			t.Errorf("last record = %+v, want ERROR startup_failed naming the config, with ui.port and executor.pool_size among its problems", rec)
		}
	})
	t.Run("text", func(t *testing.T) {
		t.Parallel()
		code, _, stderr := svcCmd(t, "run", "-config", bad, "-log-format", "text")
		if code != 1 || !strings.Contains(stderr, "level=ERROR msg=startup_failed") || strings.Contains(stderr, "{") {
			t.Errorf("exit %d, stderr:\n%s\nwant 1 and one text record startup_failed", code, stderr)
		}
	})
}

// TestHangupIsLoggedAndIgnored: SIGHUP leaves svc run serving (it logs
// signal_ignored); the worker then drains on SIGTERM and its next start
// finds a clean stop, no crash.
func TestHangupIsLoggedAndIgnored(t *testing.T) {
	t.Parallel()
	ui := freePort(t)
	cfg := workertest.WriteConfig(t, fmt.Sprintf(`
[worker]
name = "hup"
[metrics]
enabled = false
[ui]
port = %d
[storage]
dir = %q
[executor]
binary_path = "/bin/cat"
[sources.http]
enabled = true
host = "127.0.0.1"
port = %d
`, ui, t.TempDir(), freePort(t)))
	base := fmt.Sprintf("http://127.0.0.1:%d", ui)
	p := start(t, "run", "-config", cfg)
	p.WaitHTTP(t, base+"/healthz")
	for range 2 {
		if err := p.Cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}
	wait.For(t, wait.Long, "signal_ignored logged for SIGHUP", func() (bool, string) {
		if p.Cmd.Process.Signal(syscall.Signal(0)) != nil {
			t.Fatalf("svc run ended on SIGHUP:\n%s", p.Output.String())
		}
		recs := p.Output.Named("signal_ignored")
		return len(recs) >= 1 && recs[0]["signal"] == "SIGHUP" && recs[0]["level"] == "WARN", p.Output.String()
	})
	r, err := http.Get(base + "/readyz")
	if err != nil || r.StatusCode != 200 {
		t.Fatalf("readyz after SIGHUP = %v %v, want 200", r, err)
	}
	r.Body.Close()
	_ = p.Cmd.Process.Signal(syscall.SIGTERM)
	if code := p.Wait(t); code != 0 || !strings.Contains(p.Output.String(), "worker_stopped") {
		t.Fatalf("exit after SIGHUP then SIGTERM = %d, want 0 after worker_stopped\n%s", code, p.Output.String())
	}
	again := start(t, "run", "-config", cfg)
	again.WaitHTTP(t, base+"/healthz")
	for _, crash := range []string{"crash_detected", "recorder_recovered"} {
		if len(again.Output.Named(crash)) > 0 {
			t.Errorf("the start after a SIGHUP logged %s:\n%s", crash, again.Output.String())
		}
	}
	_ = again.Cmd.Process.Signal(syscall.SIGTERM)
	again.Wait(t)
}

// firstEntry is the first file name in dir.
func firstEntry(t *testing.T, dir string) string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) == 0 {
		t.Fatalf("read %s: %v (%d entries)", dir, err, len(entries))
	}
	return entries[0].Name()
}
