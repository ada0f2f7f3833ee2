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
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"svc/worker/workertest/wait"
)

// The shell examples of docs/api.md are of four kinds, each told by an
// HTML comment on the line before its fence (invisible on GitHub):
//
//	<!-- example: setup -->      the variables every example uses (UI, AUTH, ...);
//	                             there is one, before the first verbatim example
//	<!-- example: verbatim -->   runs as it stands against `svc demo`, after setup
//	<!-- example: template: NAME = what to put there; OTHER = ... -->
//	                             each <NAME> in the block is a placeholder, and
//	                             every placeholder is named in the comment
//	<!-- example: manual: why -->  not run by the tests, for the reason given
const apiDoc = "docs/api.md"

type docExample struct {
	line         int               // of the opening fence, 1-based
	kind         string            // setup, verbatim, template, manual
	detail       string            // the comment's text after the kind
	placeholders map[string]string // template: name -> meaning
	body         string
}

var (
	exampleMarker = regexp.MustCompile(`^<!-- example: ([a-z]+)(?:: (.*?))? -->$`)
	placeholder   = regexp.MustCompile(`<([A-Z][A-Z0-9_]*)>`)
	shellFence    = regexp.MustCompile("^```(sh|bash|shell|console)\\b")
)

// docExamples reads the shell examples of the markdown file at path. A
// malformed marker, or a shell block without one, fails t.
func docExamples(t *testing.T, path string) []docExample {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	var out []docExample
	for i := 0; i < len(lines); i++ {
		line := strings.TrimRight(lines[i], " \t")
		if strings.HasPrefix(line, "<!-- example:") {
			if i+1 >= len(lines) || !shellFence.MatchString(lines[i+1]) {
				t.Errorf("%s:%d: an example marker not followed by a ```sh fence on the next line", path, i+1)
			}
			continue
		}
		if !strings.HasPrefix(line, "```") || line == "```" {
			continue
		}
		// Any opening fence: find its end, so a fence inside is not read
		// as an opening one.
		end := i + 1
		for end < len(lines) && strings.TrimRight(lines[end], " \t") != "```" {
			end++
		}
		if !shellFence.MatchString(line) {
			i = end
			continue
		}
		ex := docExample{line: i + 1, body: strings.Join(lines[i+1:min(end, len(lines))], "\n") + "\n"}
		i = end
		var m []string
		if ex.line >= 2 {
			m = exampleMarker.FindStringSubmatch(strings.TrimRight(lines[ex.line-2], " \t"))
		}
		if m == nil {
			t.Errorf("%s:%d: a shell example without a marker on the line before its fence (<!-- example: verbatim -->, <!-- example: template: NAME = ... -->, <!-- example: manual: why -->)", path, ex.line)
			continue
		}
		ex.kind, ex.detail = m[1], m[2]
		switch ex.kind {
		case "setup", "verbatim":
			if ex.detail != "" {
				t.Errorf("%s:%d: example %s takes no detail, got %q", path, ex.line, ex.kind, ex.detail)
			}
			if ph := placeholder.FindAllString(ex.body, -1); len(ph) > 0 {
				t.Errorf("%s:%d: a %s example holds placeholders %v: mark it template and name them", path, ex.line, ex.kind, ph)
			}
		case "template":
			ex.placeholders = map[string]string{}
			for _, p := range strings.Split(ex.detail, ";") {
				name, meaning, ok := strings.Cut(p, "=")
				name, meaning = strings.TrimSpace(name), strings.TrimSpace(meaning)
				if !ok || !regexp.MustCompile(`^[A-Z][A-Z0-9_]*$`).MatchString(name) || meaning == "" {
					t.Errorf("%s:%d: template placeholder %q is not NAME = what to put there", path, ex.line, strings.TrimSpace(p))
					continue
				}
				ex.placeholders[name] = meaning
			}
			used := map[string]bool{}
			for _, m := range placeholder.FindAllStringSubmatch(ex.body, -1) {
				used[m[1]] = true
				if _, ok := ex.placeholders[m[1]]; !ok {
					t.Errorf("%s:%d: placeholder <%s> is not named in the template marker", path, ex.line, m[1])
				}
			}
			for name := range ex.placeholders {
				if !used[name] {
					t.Errorf("%s:%d: the template marker names %s, which the example does not use as <%s>", path, ex.line, name, name)
				}
			}
		case "manual":
			if ex.detail == "" {
				t.Errorf("%s:%d: a manual example must say why it is not run", path, ex.line)
			}
		default:
			t.Errorf("%s:%d: unknown example kind %q (setup, verbatim, template, manual)", path, ex.line, ex.kind)
		}
		out = append(out, ex)
	}
	return out
}

// TestAPIDocExamplesMarked: every shell example of docs/api.md says
// whether it runs as it stands against svc demo or is a template, and a
// template names each of its placeholders.
func TestAPIDocExamplesMarked(t *testing.T) {
	t.Parallel()
	examples := docExamples(t, apiDoc)
	kinds := map[string]int{}
	firstVerbatim := 0
	setups := 0
	for _, ex := range examples {
		kinds[ex.kind]++
		if ex.kind == "verbatim" && firstVerbatim == 0 {
			firstVerbatim = ex.line
		}
		if ex.kind == "setup" {
			setups++
			if firstVerbatim != 0 {
				t.Errorf("%s:%d: the setup example comes after the first verbatim one (line %d)", apiDoc, ex.line, firstVerbatim)
			}
		}
	}
	if setups != 1 {
		t.Errorf("%s has %d setup examples, want 1", apiDoc, setups)
	}
	if kinds["verbatim"] < 5 {
		t.Errorf("%s has %d verbatim examples (kinds: %v), want the doc's examples (is the parser reading it?)", apiDoc, kinds["verbatim"], kinds)
	}
	t.Logf("%s: %v", apiDoc, kinds)
}

// TestAPIDocExamplesRun runs every verbatim shell example of docs/api.md
// against a real `svc demo`, each after the setup example, in bash with
// -euo pipefail, and fails on a non-2xx answer, a failing command, or an
// empty answer where the doc's samples show a filled one.
//
// What the test changes in an example's text: only the demo's addresses.
// The demo runs on free ports, so 127.0.0.1:8080 (UI), 127.0.0.1:8090
// (ingress) and 127.0.0.1:9090 (metrics) become the ports it bound. Around
// the text it adds a bash function named curl, which runs the real curl
// with --fail-with-body (so a non-2xx answer fails the example, its body
// shown) and keeps a copy of each answer for the checks below.
func TestAPIDocExamplesRun(t *testing.T) {
	if testing.Short() {
		t.Skip("starts svc demo and waits ~20 s for its DLQ to fill: not under -short")
	}
	t.Parallel()
	for _, tool := range []string{"bash", "curl", "grep", "sed"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("the examples of %s need %s: %v", apiDoc, tool, err)
			}
			t.Skipf("the examples of %s need %s, not found: %v", apiDoc, tool, err)
		}
	}
	examples := docExamples(t, apiDoc)
	if t.Failed() {
		t.FailNow()
	}
	var setup string
	for _, ex := range examples {
		if ex.kind == "setup" {
			setup = ex.body
		}
	}

	ui, in, mt := freePort(t), freePort(t), freePort(t)
	p := start(t, "demo", "-ui-port", fmt.Sprint(ui), "-ingress-port", fmt.Sprint(in), "-metrics-port", fmt.Sprint(mt))
	base := fmt.Sprintf("http://127.0.0.1:%d", ui)
	p.WaitHTTP(t, base+"/healthz")
	// What the examples read: finished tasks, and two DLQ records (an
	// example pages from the newest record to the one before it). The
	// demo dead-letters two samples in six, one every 6 s.
	wait.For(t, wait.Long, "the demo to finish tasks and dead-letter two of them", func() (bool, string) {
		var tasks struct {
			Results []json.RawMessage `json:"results"`
		}
		var dlq struct {
			Total int64 `json:"total"`
		}
		if err := getJSONOK(base+"/api/v1/live/task-results?limit=1", &tasks); err != nil {
			return false, err.Error()
		}
		if err := getJSONOK(base+"/api/v1/debug/dlq/records?limit=1", &dlq); err != nil {
			return false, err.Error()
		}
		return len(tasks.Results) > 0 && dlq.Total >= 2, fmt.Sprintf("%d task rows, %d DLQ records", len(tasks.Results), dlq.Total)
	})

	addrs := strings.NewReplacer(
		"127.0.0.1:8080", fmt.Sprintf("127.0.0.1:%d", ui),
		"127.0.0.1:8090", fmt.Sprintf("127.0.0.1:%d", in),
		"127.0.0.1:9090", fmt.Sprintf("127.0.0.1:%d", mt),
	)
	ran := 0
	for _, ex := range examples {
		if ex.kind == "template" || ex.kind == "manual" {
			t.Logf("%s:%d: not run: a %s example (%s)", apiDoc, ex.line, ex.kind, ex.detail)
		}
		if ex.kind != "verbatim" {
			continue
		}
		ran++
		runDocExample(t, ex, addrs.Replace(setup), addrs.Replace(ex.body))
	}
	if ran == 0 {
		t.Fatalf("%s has no verbatim examples", apiDoc)
	}
	_ = p.Cmd.Process.Signal(syscall.SIGINT)
	if code := p.Wait(t); code != 0 {
		t.Errorf("demo exit = %d\n%s", code, p.Output.String())
	}
}

// exampleShell is what wraps an example: strict mode, and curl failing on
// a non-2xx answer with each answer kept (N.args: its arguments, NUL
// separated; N.out: what it wrote to stdout) in $SVC_DOC_CALLS.
const exampleShell = `set -euo pipefail
shopt -s inherit_errexit
curl() {
  local n
  n=$(( $(cat "$SVC_DOC_CALLS/n") + 1 ))
  echo "$n" > "$SVC_DOC_CALLS/n"
  printf '%s\0' "$@" > "$SVC_DOC_CALLS/$n.args"
  command curl --fail-with-body "$@" | tee "$SVC_DOC_CALLS/$n.out"
}
`

// runDocExample runs one verbatim example after setup and checks each of
// its answers.
func runDocExample(t *testing.T, ex docExample, setup, body string) {
	t.Helper()
	where := fmt.Sprintf("%s:%d", apiDoc, ex.line)
	dir, calls := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(calls, "n"), []byte("0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(calls, "example.sh")
	if err := os.WriteFile(script, []byte(exampleShell+setup+body), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", script)
	cmd.Dir = dir
	// The demo has no UI token: a reader's SVC_UI_TOKEN must not leak in.
	cmd.Env = append(envWithout(os.Environ(), "SVC_UI_TOKEN"), "SVC_DOC_CALLS="+calls)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Errorf("%s: the example failed (%v):\n%s\nstdout:\n%s\nstderr:\n%s", where, err, body, exampleTail(stdout.String()), exampleTail(stderr.String()))
		return
	}
	n, _ := strconv.Atoi(strings.TrimSpace(exampleRead(t, filepath.Join(calls, "n"))))
	if n == 0 {
		t.Errorf("%s: the example made no HTTP request:\n%s", where, body)
	}
	for i := 1; i <= n; i++ {
		args := strings.Split(strings.TrimSuffix(exampleRead(t, filepath.Join(calls, fmt.Sprintf("%d.args", i))), "\x00"), "\x00")
		answer := []byte(exampleRead(t, filepath.Join(calls, fmt.Sprintf("%d.out", i))))
		// curl -o FILE: the answer is the file.
		for j, a := range args {
			if a == "-o" && j+1 < len(args) {
				answer = []byte(exampleRead(t, filepath.Join(dir, args[j+1])))
			}
		}
		if problem := emptyAnswer(answer); problem != "" {
			t.Errorf("%s: curl %s: %s; answer:\n%s", where, strings.Join(args, " "), problem, exampleTail(string(answer)))
		}
	}
}

// emptyOK are the top-level arrays an answer of a one-worker demo rightly
// leaves empty: no other worker is missing from a fleet-wide answer.
var emptyOK = map[string]bool{"missing": true}

// emptyAnswer says what is empty in an answer whose doc sample shows it
// filled, "" when nothing is: the answer itself; a JSON object's top-level
// arrays (null or []), but those of emptyOK; an NDJSON stream with no
// record line (a summary line alone), or with an error line.
func emptyAnswer(b []byte) string {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return "an empty answer"
	}
	if b[0] != '{' {
		return "" // not JSON (a database file, metrics text): not empty
	}
	lines := bytes.Split(b, []byte("\n"))
	if len(lines) > 1 {
		records := 0
		for _, l := range lines {
			var obj map[string]json.RawMessage
			if err := json.Unmarshal(l, &obj); err != nil {
				return fmt.Sprintf("a line that is not a JSON object (%v)", err)
			}
			if _, ok := obj["error"]; ok {
				return "an error line in the stream"
			}
			if _, ok := obj["summary"]; !ok {
				records++
			}
		}
		if records == 0 {
			return "no record line, only the summary"
		}
		return ""
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(b, &obj); err != nil {
		return fmt.Sprintf("not a JSON object (%v)", err)
	}
	if _, ok := obj["summary"]; ok {
		return "no record line, only the summary"
	}
	var empty []string
	for k, v := range obj {
		if emptyOK[k] {
			continue
		}
		var arr []json.RawMessage
		if string(v) == "null" && arrayField(k) || json.Unmarshal(v, &arr) == nil && arr != nil && len(arr) == 0 {
			empty = append(empty, k)
		}
	}
	sort.Strings(empty)
	if len(empty) > 0 {
		return "empty " + strings.Join(empty, ", ")
	}
	return ""
}

// arrayField reports whether a null field of an answer stands for an
// empty list (the DLQ page's records, when nothing matched).
func arrayField(k string) bool {
	switch k {
	case "records", "rows", "events", "results", "tasks", "workers", "databases", "topics", "families":
		return true
	}
	return false
}

func getJSONOK(url string, v any) error {
	r, err := http.Get(url)
	if err != nil {
		return err
	}
	defer r.Body.Close()
	if r.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, r.Status)
	}
	return json.NewDecoder(r.Body).Decode(v)
}

func exampleRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func envWithout(env []string, name string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, name+"=") {
			out = append(out, kv)
		}
	}
	return out
}

func exampleTail(s string) string {
	if len(s) > 2000 {
		return "…" + s[len(s)-2000:]
	}
	return s
}
