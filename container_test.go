package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"svc/worker/workertest"
	"svc/worker/workertest/wait"
)

// image is what the Dockerfile's final stage sets up, read from the file
// itself so the tests follow it.
type image struct {
	binary      string            // where the svc binary is copied to
	folders     map[string][2]int // folders copied from the build stage, with their owner uid, gid
	env         []string          // ENV
	uid, gid    int               // USER
	entrypoint  []string
	cmd         []string
	healthcheck []string // HEALTHCHECK CMD
}

// readDockerfile parses the final stage of the repository's Dockerfile:
// the instructions it uses, in the forms it uses them (exec-form JSON
// arrays, numeric USER, COPY --from=build [--chown=U:G] /out/X /X).
func readDockerfile(t *testing.T) image {
	t.Helper()
	data, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.HasPrefix(lines[i], "FROM ") {
			lines = lines[i+1:]
			break
		}
	}
	img := image{folders: map[string][2]int{}}
	jsonArgs := func(s string) []string {
		var a []string
		if err := json.Unmarshal([]byte(s), &a); err != nil {
			t.Fatalf("Dockerfile: %q is not an exec-form JSON array: %v", s, err)
		}
		return a
	}
	for _, line := range lines {
		line = strings.TrimSpace(line)
		instr, rest, _ := strings.Cut(line, " ")
		switch instr {
		case "COPY":
			fields := strings.Fields(rest)
			if len(fields) < 3 || fields[0] != "--from=build" {
				t.Fatalf("Dockerfile: unexpected COPY %q", rest)
			}
			owner := [2]int{0, 0}
			if c, ok := strings.CutPrefix(fields[1], "--chown="); ok {
				u, g, _ := strings.Cut(c, ":")
				owner[0], _ = strconv.Atoi(u)
				owner[1], _ = strconv.Atoi(g)
			}
			src, dst := fields[len(fields)-2], fields[len(fields)-1]
			if src == "/out/svc" {
				img.binary = dst
			} else {
				img.folders[dst] = owner
			}
		case "ENV":
			k, v, _ := strings.Cut(rest, "=")
			img.env = append(img.env, k+"="+v)
		case "USER":
			u, g, _ := strings.Cut(rest, ":")
			var errU, errG error
			img.uid, errU = strconv.Atoi(u)
			img.gid, errG = strconv.Atoi(g)
			if errU != nil || errG != nil {
				t.Fatalf("Dockerfile: USER %q: want numeric uid:gid (Kubernetes' runAsNonRoot needs a number)", rest)
			}
		case "ENTRYPOINT":
			img.entrypoint = jsonArgs(rest)
		case "CMD":
			img.cmd = jsonArgs(rest)
		case "HEALTHCHECK":
			_, c, ok := strings.Cut(rest, " CMD ")
			if !ok {
				t.Fatalf("Dockerfile: HEALTHCHECK %q has no CMD", rest)
			}
			img.healthcheck = jsonArgs(c)
		}
	}
	if img.binary == "" || img.uid == 0 || len(img.entrypoint) == 0 || len(img.healthcheck) == 0 {
		t.Fatalf("Dockerfile's final stage: %+v, want the binary, a non-root USER, an ENTRYPOINT and a HEALTHCHECK", img)
	}
	return img
}

// imageRoot builds the image's file system without Docker: the folders of
// the distroless base the worker may touch (/tmp, the nonroot user's
// home), the Dockerfile's own folders with their owners, the binary, and
// the config at $SVC_CONFIG.
func imageRoot(t *testing.T, img image, config string) string {
	t.Helper()
	root := t.TempDir()
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	mkdir := func(dir string, mode os.FileMode, uid, gid int) {
		p := filepath.Join(root, dir)
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(p, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	mkdir("/tmp", 0o777|os.ModeSticky, 0, 0)
	mkdir("/home/nonroot", 0o700, 65532, 65532)
	for dir, owner := range img.folders {
		mkdir(dir, 0o755, owner[0], owner[1])
	}
	bin, err := os.ReadFile(svcBin)
	if err != nil {
		t.Fatal(err)
	}
	mkdir(filepath.Dir(img.binary), 0o755, 0, 0)
	if err := os.WriteFile(filepath.Join(root, img.binary), bin, 0o755); err != nil {
		t.Fatal(err)
	}
	cfgPath := ""
	for _, kv := range img.env {
		if v, ok := strings.CutPrefix(kv, "SVC_CONFIG="); ok {
			cfgPath = v
		}
	}
	if cfgPath == "" {
		t.Fatal("the Dockerfile sets no SVC_CONFIG: svc health in the HEALTHCHECK cannot find the config")
	}
	mkdir(filepath.Dir(cfgPath), 0o755, 0, 0)
	if err := os.WriteFile(filepath.Join(root, cfgPath), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	return root
}

// inImage returns a command that runs argv in root as the image's user,
// with the image's environment and the HOME Docker sets for that user.
func inImage(root string, img image, argv []string) *exec.Cmd {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = "/"
	cmd.Env = append([]string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/home/nonroot", "SVC_UI_TOKEN=image-token-0123456789"}, img.env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Chroot:     root,
		Credential: &syscall.Credential{Uid: uint32(img.uid), Gid: uint32(img.gid)},
	}
	return cmd
}

// imageConfig is testdata/docker/svc.toml with free ports and the svc
// binary's own sample executor (the image holds no other).
func imageConfig(t *testing.T, ui, ingress, metrics int) string {
	t.Helper()
	return fmt.Sprintf(`
[worker]
name = "image"
[metrics]
port = %d
[ui]
host = "0.0.0.0"
port = %d
auth_token = "${SVC_UI_TOKEN}"
[storage]
dir = "/var/lib/svc"
[executor]
binary_path = "/usr/local/bin/svc"
args = ["exec-demo"]
[sources.http]
enabled = true
port = %d
[[sources.http.clients]]
name = "billing"
token = "billing-token-0123456789"
`, metrics, ui, ingress)
}

// TestImageLayout runs the binary as the Dockerfile's image would, without
// Docker: chrooted into the image's folder layout as uid 65532. A start
// logs no warning (the UI release is staged into the image's
// /var/cache/svc-ui), the HEALTHCHECK's command exits 0 once the worker is
// ready and 1 after it stopped.
func TestImageLayout(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("skipped: chroot and a switch to uid 65532 need root")
	}
	img := readDockerfile(t)
	ui, in, mt := freePort(t), freePort(t), freePort(t)
	root := imageRoot(t, img, imageConfig(t, ui, in, mt))

	run := inImage(root, img, append(append([]string{}, img.entrypoint...), img.cmd...))
	logs := &workertest.Logs{}
	run.Stdout, run.Stderr = logs, logs
	if err := run.Start(); err != nil {
		t.Fatalf("start svc in the image layout: %v", err)
	}
	done := make(chan struct{})
	go func() { _ = run.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = run.Process.Kill()
		<-done
	})
	health := func() (int, string) {
		hc := inImage(root, img, img.healthcheck)
		out, err := hc.CombinedOutput()
		if _, ok := err.(*exec.ExitError); err != nil && !ok {
			t.Fatalf("run the HEALTHCHECK %v: %v", img.healthcheck, err)
		}
		return hc.ProcessState.ExitCode(), string(out)
	}
	wait.For(t, wait.Long, "the HEALTHCHECK to pass", func() (bool, string) {
		select {
		case <-done:
			t.Fatalf("svc exited in the image layout:\n%s", logs.String())
		default:
		}
		code, out := health()
		return code == 0 && strings.Contains(out, "ready"), fmt.Sprintf("exit %d: %s", code, out)
	})
	var staged []map[string]any
	wait.For(t, wait.Long, "the UI release staged (or failing to)", func() (bool, string) {
		staged = append(logs.Named("ui_bundle_staged"), logs.Named("ui_bundle_stage_failed")...)
		return len(staged) > 0, logs.String()
	})
	if dir, _ := staged[0]["dir"].(string); staged[0]["msg"] != "ui_bundle_staged" || !strings.HasPrefix(dir, "/var/cache/svc-ui/") {
		t.Errorf("the UI release staging logged %v, want it staged into the image's /var/cache/svc-ui", staged[0])
	}
	for _, level := range []string{"WARN", "ERROR"} {
		if strings.Contains(logs.String(), `"level":"`+level+`"`) {
			t.Errorf("a start in the image logged %s records, want none:\n%s", level, logs.String())
		}
	}
	if err := run.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("svc did not stop on SIGTERM:\n%s", logs.String())
	}
	if code := run.ProcessState.ExitCode(); code != 0 {
		t.Errorf("exit on SIGTERM = %d, want 0\n%s", code, logs.String())
	}
	if code, out := health(); code != 1 || !strings.Contains(out, "not ready") {
		t.Errorf("HEALTHCHECK after the worker stopped = exit %d: %s, want 1, not ready", code, out)
	}
}

// TestHealthExitCodes: svc health -url exits 0 on a 200 from /readyz and 1
// on a 503, printing the answer's reasons.
func TestHealthExitCodes(t *testing.T) {
	t.Parallel()
	var notReady atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" {
			http.NotFound(w, r)
			return
		}
		if notReady.Load() {
			w.WriteHeader(503)
			fmt.Fprint(w, `{"status":"not_ready","reasons":["executor: starting"]}`)
			return
		}
		fmt.Fprint(w, `{"status":"ready"}`)
	}))
	defer srv.Close()
	code, stdout, stderr := svcCmd(t, "health", "-url", srv.URL+"/readyz")
	if code != 0 || !strings.Contains(stdout, `"status":"ready"`) {
		t.Errorf("svc health on a ready worker = exit %d\n%s%s, want 0", code, stdout, stderr)
	}
	notReady.Store(true)
	code, stdout, stderr = svcCmd(t, "health", "-url", srv.URL+"/readyz")
	if code != 1 || !strings.Contains(stderr, "503") || !strings.Contains(stderr, "executor: starting") {
		t.Errorf("svc health on a worker not ready = exit %d\n%s%s, want 1 naming the 503 and its reason", code, stdout, stderr)
	}
}

// TestDockerImage builds the image and runs it until Docker calls it
// healthy; it skips where no Docker engine answers.
func TestDockerImage(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("skipped in -short: builds a Docker image")
	}
	if _, err := exec.LookPath("docker"); err != nil {
		t.Skip("skipped: no docker client on PATH")
	}
	if out, err := exec.Command("docker", "info", "--format", "{{.ServerVersion}}").CombinedOutput(); err != nil {
		t.Skipf("skipped: no Docker engine answers (docker info: %v: %s)", err, strings.TrimSpace(string(out)))
	}
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Minute)
	defer cancel()
	docker := func(args ...string) string {
		t.Helper()
		out, err := exec.CommandContext(ctx, "docker", args...).CombinedOutput()
		if err != nil {
			t.Fatalf("docker %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	tag := workertest.UniqueName("svc-test") + ":latest"
	docker("build", "-t", tag, ".")
	t.Cleanup(func() { _ = exec.Command("docker", "rmi", "-f", tag).Run() })
	cfg := filepath.Join(t.TempDir(), "svc.toml")
	if err := os.WriteFile(cfg, []byte(imageConfig(t, 8080, 8090, 9090)), 0o644); err != nil {
		t.Fatal(err)
	}
	id := docker("run", "-d", "-e", "SVC_UI_TOKEN=image-token-0123456789", "-v", cfg+":/etc/svc/svc.toml:ro", tag)
	t.Cleanup(func() { _ = exec.Command("docker", "rm", "-f", id).Run() })
	wait.For(t, 3*time.Minute, "Docker to call the container healthy", func() (bool, string) {
		status := docker("inspect", "-f", "{{.State.Status}} {{.State.Health.Status}}", id)
		if strings.HasPrefix(status, "exited") {
			t.Fatalf("the container exited:\n%s", docker("logs", id))
		}
		return status == "running healthy", status
	})
	logs := docker("logs", id)
	for _, level := range []string{"WARN", "ERROR"} {
		if strings.Contains(logs, `"level":"`+level+`"`) {
			t.Errorf("the container's start logged %s records, want none:\n%s", level, logs)
		}
	}
	if !strings.Contains(logs, `"dir":"/var/cache/svc-ui/`) {
		t.Errorf("the container did not stage the UI release into /var/cache/svc-ui:\n%s", logs)
	}
}
