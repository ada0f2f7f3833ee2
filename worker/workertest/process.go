package workertest

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"svc/worker/workertest/wait"
)

// MainWithSvc is the TestMain of a package whose tests run the svc binary:
// it builds the binary, sets *bin to its path, runs the tests, removes the
// binary and returns the exit code for os.Exit.
func MainWithSvc(m *testing.M, bin *string) int {
	b, remove, err := buildSvc()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer remove()
	*bin = b
	return m.Run()
}

// BuildSvc builds the svc binary as it ships into a new temporary
// directory, removed when t ends.
func BuildSvc(t testing.TB) string {
	t.Helper()
	bin, remove, err := buildSvc()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(remove)
	return bin
}

// buildSvc builds the svc binary as it ships (CGO_ENABLED=0) into a new
// temporary directory; remove deletes it.
func buildSvc() (bin string, remove func(), err error) {
	dir, err := os.MkdirTemp("", "svc-bin-")
	if err != nil {
		return "", nil, err
	}
	remove = func() { os.RemoveAll(dir) }
	bin = filepath.Join(dir, "svc")
	build := exec.Command("go", "build", "-o", bin, "svc")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		remove()
		return "", nil, fmt.Errorf("build svc: %w\n%s", err, out)
	}
	return bin, remove, nil
}

// Proc is a child process of a test, killed and reaped when the test ends.
type Proc struct {
	Cmd    *exec.Cmd
	Output *Logs // stdout and stderr together
	done   chan struct{}
}

// Start runs bin with args.
func Start(t testing.TB, bin string, args ...string) *Proc {
	t.Helper()
	p := &Proc{Cmd: exec.Command(bin, args...), Output: &Logs{}, done: make(chan struct{})}
	p.Cmd.Stdout, p.Cmd.Stderr = p.Output, p.Output
	if err := p.Cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = p.Cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		_ = p.Cmd.Process.Kill()
		<-p.done
	})
	return p
}

// exited reports whether the process has ended.
func (p *Proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Wait waits for the process to exit and returns its exit code.
func (p *Proc) Wait(t testing.TB) int {
	t.Helper()
	wait.For(t, 30*time.Second, p.Cmd.Path+" to exit", func() (bool, string) {
		return p.exited(), "output:\n" + p.Output.String()
	})
	return p.Cmd.ProcessState.ExitCode()
}

// WaitHTTP waits until url answers, whatever the status; it fails at once
// when the process exits first.
func (p *Proc) WaitHTTP(t testing.TB, url string) {
	t.Helper()
	wait.For(t, wait.Long, url+" to answer", func() (bool, string) {
		if p.exited() {
			t.Fatalf("%s exited (%s) before %s answered; output:\n%s", p.Cmd.Path, p.Cmd.ProcessState, url, p.Output.String())
		}
		r, err := http.Get(url)
		if err != nil {
			return false, err.Error()
		}
		r.Body.Close()
		return true, ""
	})
}

// WriteConfig writes body as svc.toml into a fresh temporary directory and
// returns its path.
func WriteConfig(t testing.TB, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "svc.toml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
