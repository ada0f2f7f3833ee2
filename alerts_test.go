package main

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

const (
	alertRules     = "docs/alerts/svc-rules.yml"
	alertRuleTests = "docs/alerts/svc-rules.test.yml"
)

// TestAlertRulesPromtool: the shipped rules load in Prometheus (promtool
// check rules) and their unit tests pass (promtool test rules: series that
// fire each alert and series that must not). Without promtool it skips,
// except when CI is set (.ci/run installs it).
func TestAlertRulesPromtool(t *testing.T) {
	t.Parallel()
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("promtool not found on PATH and CI is set: install Debian's prometheus package (.ci/run does)")
		}
		t.Skip("skipped: promtool not found on PATH (Debian: apt-get install prometheus)")
	}
	for _, args := range [][]string{{"check", "rules", alertRules}, {"test", "rules", alertRuleTests}} {
		out, err := exec.Command(promtool, args...).CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// TestAlertRulesUseRealMetrics: every svc_ metric the rules read is one the
// code exports, every alert has a unit test, and docs/operations.md's
// Alerts section says what to do about each.
func TestAlertRulesUseRealMetrics(t *testing.T) {
	t.Parallel()
	rules, err := os.ReadFile(alertRules)
	if err != nil {
		t.Fatal(err)
	}
	tests, err := os.ReadFile(alertRuleTests)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	_, alertsDoc, _ := strings.Cut(string(doc), "\n## Alerts\n")
	alertsDoc, _, _ = strings.Cut(alertsDoc, "\n## ")

	exported := exportedMetrics(t)
	var missing []string
	for _, name := range regexp.MustCompile(`\bsvc_[a-z0-9_]+`).FindAllString(string(rules), -1) {
		base := regexp.MustCompile(`_(bucket|count|sum)$`).ReplaceAllString(name, "")
		if !exported[name] && !exported[base] {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		t.Errorf("%s reads metrics the code does not export: %v", alertRules, missing)
	}

	alerts := regexp.MustCompile(`(?m)^\s+- alert: (\w+)$`).FindAllStringSubmatch(string(rules), -1)
	if len(alerts) < 10 {
		t.Fatalf("found %d alerts in %s, want the whole set", len(alerts), alertRules)
	}
	for _, a := range alerts {
		name := a[1]
		if !strings.Contains(string(tests), "alertname: "+name+"\n") {
			t.Errorf("alert %s has no unit test in %s", name, alertRuleTests)
		}
		if !strings.Contains(alertsDoc, "`"+name+"`") {
			t.Errorf("alert %s is not documented in docs/operations.md, Alerts", name)
		}
	}
}

// exportedMetrics returns the svc_ metric names written as string
// literals in the non-test Go files (each package's metrics.go and the
// collectors beside them).
func exportedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	lit := regexp.MustCompile(`"(svc_[a-z0-9_]+)"`)
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != "." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range lit.FindAllStringSubmatch(string(b), -1) {
			names[m[1]] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(names) < 50 {
		all := make([]string, 0, len(names))
		for n := range names {
			all = append(all, n)
		}
		sort.Strings(all)
		t.Fatalf("found %d svc_ metric names in the code, want the whole set: %v", len(all), all)
	}
	return names
}
