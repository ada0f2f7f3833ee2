package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadmeRunningWorksWhenPasted follows the README's "Running it" block
// in its order: the config it writes, the variables it exports, and each
// `./svc check` with what was set before it, which must pass (it once ran
// before the token its config needs was exported). It also keeps the
// README's first two commands: the demo and the test command.
func TestReadmeRunningWorksWhenPasted(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, top, _ := strings.Cut(string(readme), "```sh\n")
	first := strings.Split(top, "\n")
	if len(first) < 2 || !strings.HasPrefix(first[0], "go run . demo ") || !strings.HasPrefix(first[1], "go test ") {
		t.Errorf("README's first commands = %q, want `go run . demo` then the test command", first[:min(2, len(first))])
	}

	_, section, ok := strings.Cut(string(readme), "\n## Running it\n")
	_, block, ok2 := strings.Cut(section, "```sh\n")
	block, _, ok3 := strings.Cut(block, "\n```")
	if !ok || !ok2 || !ok3 {
		t.Fatal(`README has no "## Running it" section with a sh block`)
	}
	dir := t.TempDir()
	if err := os.Symlink(svcBin, filepath.Join(dir, "svc")); err != nil {
		t.Fatal(err)
	}
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}
	var steps []string
	lines := strings.Split(block, "\n")
	for i := 0; i < len(lines); i++ {
		line, _, _ := strings.Cut(lines[i], "  #")
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "cat > ") && strings.HasSuffix(line, "<<'EOF'"):
			name := strings.Fields(line)[2]
			var body []string
			for i++; i < len(lines) && lines[i] != "EOF"; i++ {
				body = append(body, lines[i])
			}
			if err := os.WriteFile(filepath.Join(dir, name), []byte(strings.Join(body, "\n")+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			steps = append(steps, "write "+name)
		case strings.HasPrefix(line, "export "):
			env = append(env, strings.TrimPrefix(line, "export "))
			steps = append(steps, "export")
		case strings.HasPrefix(line, "./svc check "):
			cmd := exec.Command(filepath.Join(dir, "svc"), strings.Fields(line)[1:]...)
			cmd.Dir, cmd.Env = dir, env
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("README step %q, pasted in order, fails: %v\n%s", line, err, out)
			}
			steps = append(steps, "check")
		case strings.HasPrefix(line, "./svc run "):
			steps = append(steps, "run")
		case strings.Contains(line, "./svc health "):
			steps = append(steps, "health")
		case strings.HasPrefix(line, "curl "):
			steps = append(steps, "curl")
		}
	}
	if got, want := strings.Join(steps, ", "), "write svc.toml, export, check, run, health, curl"; got != want {
		t.Errorf("README's Running it steps = %s, want %s", got, want)
	}
}
