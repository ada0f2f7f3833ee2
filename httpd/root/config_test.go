package root

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"svc/worker/config"
)

func noEnv(string) (string, bool) { return "", false }

// Each invalid config names the problem it must produce on its first line:
// "# want: <substring of the error>[ | <another substring>...]".
func TestTestdataInvalidConfigsFail(t *testing.T) {
	t.Parallel()
	files, _ := filepath.Glob("../../testdata/config/invalid/*.toml")
	if len(files) < 80 {
		t.Fatalf("found %d invalid configs, want one per rule", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			first, _, _ := strings.Cut(string(data), "\n")
			want, ok := strings.CutPrefix(first, "# want: ")
			if !ok {
				t.Fatalf("%s lacks a '# want:' first line", f)
			}
			_, err = LoadConfig(f)
			var ce *config.Error
			if !errors.As(err, &ce) {
				t.Fatalf("LoadConfig = %v, want *config.Error", err)
			}
			for _, part := range strings.Split(want, " | ") {
				if !strings.Contains(err.Error(), part) {
					t.Fatalf("error does not name the problem\n got: %v\nwant substring: %s", err, part)
				}
			}
			if !strings.Contains(err.Error(), f) {
				t.Errorf("error %q does not name the file", err)
			}
		})
	}
}

func TestParseReportsEveryProblemAtOnce(t *testing.T) {
	t.Parallel()
	_, err := config.Parse([]byte(`
[worker]
name = "bad name!"
[ui]
port = 70000
[ui.link_bases]
docs = "ftp://x"
[sources.http]
max_concurrent = 0
`), noEnv, CheckUI)
	if err == nil {
		t.Fatal("Parse = nil error, want problems")
	}
	for _, want := range []string{
		"worker.name (line 3)", "ui.port (line 5)", "ui.link_bases.docs (line 7): the base name \"docs\" is reserved",
		"ui.link_bases.docs (line 7): \"ftp://x\" must start with http:// or https://",
		"no input source is enabled", "executor.binary_path: required",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

// The declared pages are plain tables in the config, read into the ui
// model by CheckUI with the loader's rules: an unknown key or a value of
// the wrong type names its key (and line), an integer may come from the
// environment, and validation problems of the rest are listed beside them.
func TestDeclaredPagesDecodeWithTheLoadersRules(t *testing.T) {
	t.Parallel()
	const head = "[executor]\nbinary_path = \"/bin/cat\"\n[sources.http]\nenabled = true\nhost = \"127.0.0.1\"\n"
	_, err := config.Parse([]byte(head+`[[handler.ui_pages]]
slug = "Orders"
colour = 3
  [[handler.ui_pages.widgets]]
  view = "table"
  columns = ["id"]
  source = { kind = "tasks", limit = "x" }
[handler.probe_details]
[[handler.probe_details.fields]]
name = "a"
view = 7
`), noEnv, CheckUI)
	for _, want := range []string{
		"handler.ui_pages[0].colour (line 8): unknown key",
		`handler.ui_pages[0].widgets[0].source.limit: want an integer, got a string ("x")`,
		`handler.probe_details.fields[0].view (line 16): want a string, got an integer (7)`,
		`handler.ui_pages[0] (slug "Orders") slug: "Orders" must match`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse error lacks %q:\n%v", want, err)
		}
	}
	env := func(k string) (string, bool) { return "7", k == "LIMIT" }
	cfg, err := config.Parse([]byte(head+`[[handler.ui_pages]]
slug = "orders"
  [[handler.ui_pages.widgets]]
  view = "table"
  columns = ["id"]
  source = { kind = "tasks", limit = "${LIMIT}" }
`), env, CheckUI)
	if err != nil {
		t.Fatalf("a limit from the environment: %v", err)
	}
	if len(cfg.Handler.UIPages) != 1 {
		t.Errorf("handler.ui_pages = %v, want the one table", cfg.Handler.UIPages)
	}
}
