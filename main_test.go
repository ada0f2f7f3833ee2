package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	_ "modernc.org/sqlite"

	"svc/worker/demo"
	"svc/worker/workertest"
	"svc/worker/workertest/wait"
)

var svcBin string

func TestMain(m *testing.M) {
	// The tests start svc processes and wait on them: -short runs run
	// more of them at once.
	workertest.ShortParallel(8)
	os.Exit(workertest.MainWithSvc(m, &svcBin))
}

func freePort(t *testing.T) int { return workertest.FreePort(t) }

func TestCheckAcceptsValidAndRejectsInvalid(t *testing.T) {
	t.Parallel()
	valid, _ := filepath.Glob("testdata/config/valid/*.toml")
	invalid, _ := filepath.Glob("testdata/config/invalid/*.toml")
	if len(valid) == 0 || len(invalid) == 0 {
		t.Fatalf("found %d valid and %d invalid configs under testdata/config", len(valid), len(invalid))
	}
	// Every config goes through run, the binary's own dispatch, in this
	// process (a process start costs ~40 ms of CPU here, 143 of them most
	// of this package's time); the first of each kind also through the
	// real binary, for its exit code and output.
	check := func(t *testing.T, f string, viaBinary bool) (int, string) {
		t.Helper()
		if viaBinary {
			cmd := exec.Command(svcBin, "check", "-config", f)
			out, _ := cmd.CombinedOutput()
			return cmd.ProcessState.ExitCode(), string(out)
		}
		var out strings.Builder
		code := run(context.Background(), []string{svcBin, "check", "-config", f}, strings.NewReader(""), &out, &out)
		return code, out.String()
	}
	for _, f := range valid {
		t.Run(filepath.Base(f), func(t *testing.T) {
			t.Parallel()
			modes := []bool{false}
			if f == valid[0] {
				modes = append(modes, true)
			}
			for _, viaBinary := range modes {
				code, out := check(t, f, viaBinary)
				if code != 0 {
					t.Errorf("svc check %s (binary: %v) exit = %d, want 0\n%s", f, viaBinary, code, out)
				}
				if strings.Contains(out, "s3cret") || strings.Contains(out, "token-a") {
					t.Errorf("svc check %s prints a secret:\n%s", f, out)
				}
			}
		})
	}
	for _, f := range invalid {
		t.Run(filepath.Base(f), func(t *testing.T) {
			t.Parallel()
			data, _ := os.ReadFile(f)
			first, _, _ := strings.Cut(string(data), "\n")
			modes := []bool{false}
			if f == invalid[0] {
				modes = append(modes, true)
			}
			for _, viaBinary := range modes {
				code, out := check(t, f, viaBinary)
				if code != 1 {
					t.Errorf("svc check %s (binary: %v) exit = %d, want 1\n%s", f, viaBinary, code, out)
				}
				for _, want := range strings.Split(strings.TrimPrefix(first, "# want: "), " | ") {
					if !strings.Contains(out, want) {
						t.Errorf("svc check %s (binary: %v) output lacks %q:\n%s", f, viaBinary, want, out)
					}
				}
			}
		})
	}
}

// start runs the svc binary with args, killed when the test ends.
func start(t *testing.T, args ...string) *workertest.Proc {
	t.Helper()
	return workertest.Start(t, svcBin, args...)
}

// SIGTERM stops intake at once and lets requests in flight finish; the
// process exits 0.
func TestShutdownDrainsInFlightAndRefusesNew(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	started := filepath.Join(dir, "started")
	exe := filepath.Join(dir, "slow.sh")
	os.WriteFile(exe, []byte(fmt.Sprintf("#!/bin/sh\ntouch %s\nsleep 2\ncat\n", started)), 0o755)
	ui, in := freePort(t), freePort(t)
	cfg := workertest.WriteConfig(t, fmt.Sprintf(`
[worker]
name = "drain"
shutdown_timeout = "20s"
[metrics]
enabled = false
[ui]
port = %d
[storage]
dir = ""
[executor]
binary_path = %q
[sources.http]
enabled = true
host = "127.0.0.1"
port = %d
`, ui, exe, in))
	// The run is profiled and traced too (-cpuprofile, -memprofile,
	// -trace): the files are written when it ends.
	cpuProf, memProf, traceOut := filepath.Join(dir, "cpu.prof"), filepath.Join(dir, "mem.prof"), filepath.Join(dir, "run.trace")
	p := start(t, "run", "-config", cfg, "-cpuprofile", cpuProf, "-memprofile", memProf, "-trace", traceOut)
	p.WaitHTTP(t, fmt.Sprintf("http://127.0.0.1:%d/healthz", ui))

	url := fmt.Sprintf("http://127.0.0.1:%d/v1/process", in)
	type result struct {
		status int
		body   string
		err    error
	}
	res := make(chan result, 1)
	go func() {
		r, err := http.Post(url, "application/octet-stream", strings.NewReader("in flight"))
		if err != nil {
			res <- result{err: err}
			return
		}
		b, _ := io.ReadAll(r.Body)
		r.Body.Close()
		res <- result{status: r.StatusCode, body: string(b)}
	}()
	wait.For(t, wait.Long, "the executor to start", func() (bool, string) {
		_, err := os.Stat(started)
		return err == nil, fmt.Sprint(err)
	})
	if err := p.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// New connections are refused while the in-flight one finishes.
	wait.For(t, wait.Long, "the ingress to refuse connections after SIGTERM", func() (bool, string) {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", in), time.Second)
		if err != nil {
			return true, ""
		}
		c.Close()
		return false, "a connection was accepted"
	})
	if len(res) > 0 {
		t.Error("ingress accepted connections after SIGTERM until the in-flight request had finished")
	}
	// Readiness flips the moment shutdown begins, while the request in
	// flight is still running (the UI server answers until the end).
	rz, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", ui))
	if err != nil {
		t.Fatalf("readyz during the drain: %v", err)
	}
	body, _ := io.ReadAll(rz.Body)
	rz.Body.Close()
	if rz.StatusCode != 503 || !strings.Contains(string(body), "draining") {
		t.Errorf("readyz during the drain = %d %s, want 503 naming the drain", rz.StatusCode, body)
	}
	r := <-res
	if r.err != nil || r.status != 200 || !strings.Contains(r.body, "in flight") {
		t.Errorf("in-flight request = %d %q %v, want 200 with its output", r.status, r.body, r.err)
	}
	if code := p.Wait(t); code != 0 {
		t.Errorf("exit code = %d, want 0\n%s", code, p.Output.String())
	}
	if !strings.Contains(p.Output.String(), "worker_stopped") {
		t.Errorf("no worker_stopped log:\n%s", p.Output.String())
	}
	for _, prof := range []string{cpuProf, memProf, traceOut} {
		if fi, err := os.Stat(prof); err != nil || fi.Size() == 0 || fi.Mode().Perm() != 0o600 {
			t.Errorf("profile %s: %v, %v; want a non-empty 0600 file", filepath.Base(prof), fi, err)
		}
	}
	// A whole trace (stopped and flushed at exit) opens with Go's header.
	if b, err := os.ReadFile(traceOut); err != nil || !bytes.HasPrefix(b, []byte("go 1.")) {
		t.Errorf("trace file: %v; want one that starts with \"go 1.\" (%d bytes)", err, len(b))
	}
}

func TestBindFailureIsFatal(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	busy := ln.Addr().(*net.TCPAddr).Port
	cases := map[string]string{
		"ui":      fmt.Sprintf("[ui]\nport = %d\n[sources.http]\nenabled = true\nhost = \"127.0.0.1\"\nport = %d\n", busy, freePort(t)),
		"ingress": fmt.Sprintf("[ui]\nport = %d\n[sources.http]\nenabled = true\nhost = \"127.0.0.1\"\nport = %d\n", freePort(t), busy),
	}
	for name, body := range cases {
		t.Run(name, func(t *testing.T) {
			storage, shared := t.TempDir(), t.TempDir()
			cfg := workertest.WriteConfig(t, fmt.Sprintf("[metrics]\nenabled = false\n[storage]\ndir = %q\n[shared]\ndir = %q\n[executor]\nbinary_path = \"/bin/cat\"\n", storage, shared)+body)
			p := start(t, "run", "-config", cfg)
			if code := p.Wait(t); code != 1 {
				t.Fatalf("exit = %d, want 1", code)
			}
			out := p.Output.String()
			if want := fmt.Sprintf("%s: bind 127.0.0.1:%d", name, busy); !strings.Contains(out, want) {
				t.Errorf("output lacks %q:\n%s", want, out)
			}
			// Nothing started before the bind failed: no warnings as if
			// serving, no history file sealed.
			for _, noise := range []string{"ui_unauthenticated", "http_ingress_unauthenticated", "worker_started"} {
				if strings.Contains(out, noise) {
					t.Errorf("a worker that could not bind logged %s:\n%s", noise, out)
				}
			}
			if sealed, _ := filepath.Glob(filepath.Join(shared, "history", "*", "*.db")); len(sealed) > 0 {
				t.Errorf("a worker that could not bind sealed %v", sealed)
			}
		})
	}
}

func TestDemoServesIngress(t *testing.T) {
	t.Parallel()
	ui, in, mt := freePort(t), freePort(t), freePort(t)
	p := start(t, "demo", "-ui-port", fmt.Sprint(ui), "-ingress-port", fmt.Sprint(in), "-metrics-port", fmt.Sprint(mt))
	p.WaitHTTP(t, fmt.Sprintf("http://127.0.0.1:%d/healthz", ui))
	// Every address the banner prints pastes into a config as it is
	// (a broker list once ended in "127.0.0.1:36201:").
	banner := p.Output.String()
	addrs := regexp.MustCompile(`127\.0\.0\.1:[^\s/,]*`).FindAllString(banner, -1)
	if len(addrs) < 4 {
		t.Fatalf("banner shows %d addresses, want brokers, UI, metrics and ingress:\n%s", len(addrs), banner)
	}
	for _, a := range addrs {
		if _, port, err := net.SplitHostPort(a); err != nil || port == "" || strings.Trim(port, "0123456789") != "" {
			t.Errorf("banner address %q is not host:port:\n%s", a, banner)
		}
	}
	req, _ := http.NewRequest("POST", fmt.Sprintf("http://127.0.0.1:%d/v1/process", in), strings.NewReader("hello demo"))
	req.Header.Set("Authorization", "Bearer demo-token-0123456789")
	r, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(r.Body)
	r.Body.Close()
	if r.StatusCode != 200 || !strings.Contains(string(b), "HELLO DEMO") {
		t.Errorf("demo ingress = %d %s", r.StatusCode, b)
	}
	// The demo executor writes one cache row, visible to operators.
	wait.For(t, wait.Long, "the demo cache row", func() (bool, string) {
		r, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/api/v1/debug/cache?prefix=demo.", ui))
		if err != nil {
			return false, err.Error()
		}
		defer r.Body.Close()
		b, _ := io.ReadAll(r.Body)
		return r.StatusCode == 200 && strings.Contains(string(b), `"key":"demo.last_task"`), fmt.Sprintf("%d %s", r.StatusCode, b)
	})
	// The embedded UI is served with no network, the demo's page included.
	for _, page := range []string{"/", "/p/summaries"} {
		r, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d%s", ui, page))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(r.Body)
		r.Body.Close()
		if r.StatusCode != 200 || !strings.Contains(string(b), "/assets/v") {
			t.Errorf("demo page %s = %d, want the UI shell:\n%s", page, r.StatusCode, b)
		}
	}
	if !strings.Contains(p.Output.String(), "curl -s") {
		t.Errorf("demo did not print a curl line:\n%s", p.Output.String())
	}
	// DLQ redrive is on in the demo, with its curl line printed: once a
	// sample failed into the DLQ, the printed dry run answers one line per
	// DLQ record and a summary. (A failing sample is fed at once: the
	// demo's own comes 4 s after the start.)
	demoFeed(t, p, `{"order":0,"customer":"initech","amount":1,"note":"please fail"}`)
	if !strings.Contains(p.Output.String(), "/api/v1/debug/dlq/redrive -d '{\"from_ts\":0}'") {
		t.Errorf("demo did not print the redrive curl line:\n%s", p.Output.String())
	}
	wait.For(t, wait.Long, "a dry-run redrive of the demo's DLQ", func() (bool, string) {
		r, err := http.Post(fmt.Sprintf("http://127.0.0.1:%d/api/v1/debug/dlq/redrive", ui), "application/json", strings.NewReader(`{"from_ts":0}`))
		if err != nil {
			return false, err.Error()
		}
		defer r.Body.Close()
		b, _ := io.ReadAll(r.Body)
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		return r.StatusCode == 200 && len(lines) >= 2 && strings.Contains(lines[0], `"outcome":"would_fail"`) &&
			strings.HasPrefix(lines[len(lines)-1], `{"summary":{"dry_run":true`), fmt.Sprintf("%d %s", r.StatusCode, b)
	})
	_ = p.Cmd.Process.Signal(syscall.SIGINT)
	if code := p.Wait(t); code != 0 {
		t.Errorf("demo exit = %d\n%s", code, p.Output.String())
	}
}

// TestDemoFoldsDeliveries: the real worker announces its sink deliveries
// to the flight recorder, which folds them (and the executor's
// annotations) into the task rows of plain successes: the live file holds
// fewer sink_delivered rows than the events API lists, and a task's trace
// still shows its delivery.
func TestDemoFoldsDeliveries(t *testing.T) {
	t.Parallel()
	ui, in, mt := freePort(t), freePort(t), freePort(t)
	p := start(t, "demo", "-ui-port", fmt.Sprint(ui), "-ingress-port", fmt.Sprint(in), "-metrics-port", fmt.Sprint(mt))
	base := fmt.Sprintf("http://127.0.0.1:%d", ui)
	p.WaitHTTP(t, base+"/healthz")
	type events struct {
		Events []struct {
			ID     int64  `json:"id"`
			TaskID string `json:"task_id"`
			Type   string `json:"type"`
		} `json:"events"`
	}
	// Two plain successes fed at once: the demo's own come every 2 s.
	demoFeed(t, p, `{"order":0,"customer":"acme","amount":1}`, `{"order":0,"customer":"globex","amount":2}`)
	var listed events
	var stored int
	wait.For(t, wait.Long, "deliveries listed by the API but not stored as event rows", func() (bool, string) {
		listed = events{}
		getJSON(t, base+"/api/v1/events?types=sink_delivered&limit=1000", &listed)
		r, err := http.Get(base + "/api/v1/debug/download-live")
		if err != nil {
			return false, err.Error()
		}
		path := filepath.Join(t.TempDir(), "live.db")
		f, _ := os.Create(path)
		io.Copy(f, r.Body)
		r.Body.Close()
		f.Close()
		db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
		if err != nil {
			return false, err.Error()
		}
		defer db.Close()
		if err := db.QueryRow(`SELECT count(*) FROM events WHERE type = 'sink_delivered'`).Scan(&stored); err != nil {
			return false, err.Error()
		}
		return len(listed.Events) >= 2 && stored < len(listed.Events),
			fmt.Sprintf("%d sink_delivered listed, %d stored as event rows", len(listed.Events), stored)
	})
	var trace events
	id := listed.Events[0].TaskID
	getJSON(t, base+"/api/v1/debug/trace?scope=local&task_id="+id, &trace)
	var types []string
	for _, e := range trace.Events {
		types = append(types, e.Type)
	}
	if !strings.Contains(strings.Join(types, ","), "sink_delivered") || !strings.Contains(strings.Join(types, ","), "task_received") {
		t.Errorf("trace of %s has %v, want its lifecycle and its delivery", id, types)
	}
	// A hangup (the demo's terminal closed) stops it as Ctrl-C does.
	_ = p.Cmd.Process.Signal(syscall.SIGHUP)
	if code := p.Wait(t); code != 0 || !strings.Contains(p.Output.String(), "worker_stopped") {
		t.Errorf("demo exit on SIGHUP = %d, want 0 after worker_stopped\n%s", code, p.Output.String())
	}
}

// demoFeed produces values to the input topic of the demo p runs, on the
// brokers its banner names, as its own samples are.
func demoFeed(t *testing.T, p *workertest.Proc, values ...string) {
	t.Helper()
	m := regexp.MustCompile(`brokers (\S+)`).FindStringSubmatch(p.Output.String())
	if m == nil {
		t.Fatalf("the demo banner names no brokers:\n%s", p.Output.String())
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(m[1], ",")...), kgo.DefaultProduceTopic(demo.TopicIn))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for _, v := range values {
		rec := &kgo.Record{Value: []byte(v), Headers: []kgo.RecordHeader{{Key: "svc-label-origin", Value: []byte("demo")}}}
		if err := cl.ProduceSync(t.Context(), rec).FirstErr(); err != nil {
			t.Fatalf("produce to the demo's %s: %v", demo.TopicIn, err)
		}
	}
}

// TestDemoExactlyOnce: `svc demo -exactly-once` consumes in exactly-once
// mode: identity says so and its transactions commit.
func TestDemoExactlyOnce(t *testing.T) {
	t.Parallel()
	ui, in, mt := freePort(t), freePort(t), freePort(t)
	p := start(t, "demo", "-exactly-once", "-ui-port", fmt.Sprint(ui), "-ingress-port", fmt.Sprint(in), "-metrics-port", fmt.Sprint(mt))
	p.WaitHTTP(t, fmt.Sprintf("http://127.0.0.1:%d/healthz", ui))
	demoFeed(t, p, `{"order":0,"customer":"acme","amount":1}`) // the demo's own sample comes 2 s after the start
	wait.For(t, wait.Long, "exactly-once identity and a committed transaction", func() (bool, string) {
		var id struct {
			Delivery string `json:"kafka_delivery"`
		}
		r, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/api/v1/identity", ui))
		if err != nil {
			return false, err.Error()
		}
		_ = json.NewDecoder(r.Body).Decode(&id)
		r.Body.Close()
		m, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", mt))
		if err != nil {
			return false, err.Error()
		}
		b, _ := io.ReadAll(m.Body)
		m.Body.Close()
		committed := regexp.MustCompile(`svc_kafka_transactions_total\{result="committed"\} [1-9]`).Match(b)
		return id.Delivery == "exactly_once" && committed, fmt.Sprintf("identity kafka_delivery %q, committed transactions seen %v", id.Delivery, committed)
	})
	_ = p.Cmd.Process.Signal(syscall.SIGINT)
	if code := p.Wait(t); code != 0 {
		t.Errorf("demo exit = %d\n%s", code, p.Output.String())
	}
}

// `svc ui pack` writes the embedded release; invoked as svc-ui the binary
// takes the same commands; a usage error exits 2.
func TestUICommands(t *testing.T) {
	t.Parallel()
	out := t.TempDir()
	b, err := exec.Command(svcBin, "ui", "pack", "-out", out).CombinedOutput()
	if err != nil {
		t.Fatalf("svc ui pack: %v\n%s", err, b)
	}
	tars, _ := filepath.Glob(filepath.Join(out, "svc-ui-v*.tar.gz"))
	if len(tars) != 1 {
		t.Fatalf("svc ui pack wrote %v, want one archive", tars)
	}
	link := filepath.Join(t.TempDir(), "svc-ui")
	if err := os.Symlink(svcBin, link); err != nil {
		t.Fatal(err)
	}
	cache := t.TempDir()
	b, err = exec.Command(link, "fetch", "-cache-dir", cache).CombinedOutput()
	if err != nil || !strings.Contains(string(b), "staged") {
		t.Fatalf("svc-ui fetch = %v\n%s, want the embedded release staged", err, b)
	}
	cmd := exec.Command(svcBin, "ui", "frobnicate")
	b, _ = cmd.CombinedOutput()
	if cmd.ProcessState.ExitCode() != 2 || !strings.Contains(string(b), "unknown svc ui command") {
		t.Errorf("svc ui frobnicate exit %d:\n%s, want 2 with a usage message", cmd.ProcessState.ExitCode(), b)
	}
}
