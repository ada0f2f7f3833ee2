package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// TestLogEventsDocumented: every named log event the code emits (the
// message of a slog Debug, Info, Warn or Error call with a snake_case
// literal) has its row in docs/operations.md's log table, so an operator
// can look up whatever the worker logs.
func TestLogEventsDocumented(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	events := logEvents(t, ".")
	if len(events) < 50 {
		t.Fatalf("found %d log events in the code, want the whole set (is the parser reading the tree?)", len(events))
	}
	// The first column of the "## Logs" table: one or more `event` names.
	documented := map[string]bool{}
	_, logs, _ := strings.Cut(string(doc), "\n## Logs\n")
	logs, _, _ = strings.Cut(logs, "\n## ")
	for _, line := range strings.Split(logs, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 3 {
			continue
		}
		for _, m := range regexp.MustCompile("`([a-z0-9_]+)`").FindAllStringSubmatch(cells[1], -1) {
			documented[m[1]] = true
		}
	}
	var missing []string
	for name, at := range events {
		if !documented[name] {
			missing = append(missing, name+" ("+at+")")
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("docs/operations.md has no log table row for %d event(s):\n%s", len(missing), strings.Join(missing, "\n"))
	}
}

var eventName = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)+$`)

// logEvents returns the named log events of the non-test Go files under
// root, each with one place that emits it.
func logEvents(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || d.Name() == "bench" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) == 0 {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			switch sel.Sel.Name {
			case "Debug", "Info", "Warn", "Error":
			default:
				return true
			}
			lit, ok := call.Args[0].(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			if s, err := strconv.Unquote(lit.Value); err == nil && eventName.MatchString(s) {
				if _, seen := out[s]; !seen {
					out[s] = fset.Position(lit.Pos()).String()
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
