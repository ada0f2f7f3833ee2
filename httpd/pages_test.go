package httpd

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"svc/ui"
	"svc/ui/release"
	"svc/worker/config"
)

// withSite serves the UI release embedded in the binary, as `svc run`
// does with ui.release.version unset.
func withSite(cfg *config.Config) *config.Config {
	cfg.UI.Release.Version = ""
	return cfg
}

func TestPageTokenFlow(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, "/bin/cat")
	cfg.UI.AuthToken = "ui-secret-0123456789"
	cfg.Handler.UIPages = []map[string]any{{"slug": "orders", "title": "Orders", "widgets": []map[string]any{
		{"title": "Tasks", "view": "stat", "source": map[string]any{"kind": "metrics", "metric": "svc_tasks_total"}}}}}
	s := startStack(t, withSite(cfg))
	assets := release.AssetsPath(ui.EmbeddedTag)

	cases := []struct {
		name, path string
		header     []string
		want       int
		body       string // substring of the answer
	}{
		{"page without token gets sign-in", "/live", nil, 401, `name="token"`},
		{"wrong token says so", "/live?token=nope", nil, 401, "not accepted"},
		{"query token opens the shell", "/live?token=ui-secret-0123456789", nil, 200, assets + "/app.js"},
		{"header token opens the shell", "/debug", []string{"Authorization", "Bearer ui-secret-0123456789"}, 200, assets + "/app.js"},
		{"declared page", "/p/orders?token=ui-secret-0123456789", nil, 200, assets + "/app.js"},
		{"unknown page is the bundle's 404", "/nope?token=ui-secret-0123456789", nil, 404, "Not found"},
		{"unknown page without token gets sign-in", "/nope", nil, 401, `name="token"`},
		{"assets are public", assets + "/style.css", nil, 200, "--accent"},
		{"api keeps its JSON 401", "/api/v1/identity", nil, 401, `"error":"unauthorized"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := do(t, "GET", s.uiURL+c.path, "", c.header...)
			if r.status != c.want || !strings.Contains(r.body, c.body) {
				t.Fatalf("GET %s = %d, want %d with %q:\n%s", c.path, r.status, c.want, c.body, r.body)
			}
			if strings.Contains(r.body, "ui-secret-0123456789") {
				t.Errorf("GET %s echoes the token", c.path)
			}
			if !strings.HasPrefix(c.path, "/api/") && !strings.Contains(r.header.Get("Content-Security-Policy"), "script-src 'self'") {
				t.Errorf("GET %s lacks the CSP: %q", c.path, r.header.Get("Content-Security-Policy"))
			}
		})
	}
}

func TestPagesWithoutBundleOrRelease(t *testing.T) {
	t.Parallel()
	s := startStack(t, testConfig(t, "/bin/cat"))
	r := do(t, "GET", s.uiURL+"/live", "")
	if r.status != 503 || !strings.Contains(r.body, `"error":"ui_bundle_missing"`) || !strings.Contains(r.body, "svc ui fetch --version="+uncachedRelease) {
		t.Errorf("page without a bundle = %d %s, want 503 naming svc ui fetch", r.status, r.body)
	}
	cfg := testConfig(t, "/bin/cat")
	cfg.UI.Release.Enabled = false
	off := startStack(t, cfg)
	if r := do(t, "GET", off.uiURL+"/", ""); r.status != 404 || !strings.Contains(r.body, "ui.release.enabled is false") {
		t.Errorf("page with ui.release.enabled false = %d %s, want 404 naming the key", r.status, r.body)
	}
	if r := do(t, "GET", off.uiURL+"/api/v1/identity", ""); r.status != 200 {
		t.Errorf("identity with ui.release.enabled false = %d, want 200", r.status)
	}
}

func TestIdentityCarriesReleaseAndLinks(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, "/bin/cat")
	cfg.UI.PrometheusURL = "https://prom.example.com"
	cfg.UI.PrometheusWorkerLabel = "instance"
	cfg.UI.CustomLinks = []config.CustomLink{{Label: "Runbook", URL: "https://wiki.example.com/svc"}, {Label: "bad", URL: "javascript:alert(1)"}}
	cfg.UI.LinkBases = map[string]string{"shop": "https://shop.example.com"}
	s := startStack(t, withSite(cfg))
	var id Identity
	r := do(t, "GET", s.uiURL+"/api/v1/identity", "")
	if err := json.Unmarshal([]byte(r.body), &id); err != nil {
		t.Fatal(err)
	}
	if id.Release != ui.EmbeddedTag {
		t.Errorf("release = %q, want the bundle tag %s", id.Release, ui.EmbeddedTag)
	}
	if id.Prometheus == nil || id.Prometheus.URL != "https://prom.example.com" || id.Prometheus.WorkerLabel != "instance" {
		t.Errorf("prometheus = %+v", id.Prometheus)
	}
	if len(id.CustomLinks) != 1 || id.CustomLinks[0].Label != "Runbook" {
		t.Errorf("custom_links = %+v, want only the http(s) one", id.CustomLinks)
	}
	if id.LinkBases["shop"] != "https://shop.example.com" || !id.Features["ui_release"] {
		t.Errorf("link_bases = %v, features = %v", id.LinkBases, id.Features)
	}
}

func TestDeclaredPagesAndProbeDetailsOnTheWire(t *testing.T) {
	t.Parallel()
	exe := script(t, `printf '{"summary":"ok","lines":[{"sku":"a-1"}]}\n'`)
	cfg := testConfig(t, exe)
	cfg.Handler.UIPages = []map[string]any{{"slug": "orders", "widgets": []map[string]any{{"view": "stat", "source": map[string]any{"kind": "metrics", "metric": "svc_tasks_total"}}}}}
	cfg.Handler.ProbeDetails = map[string]any{"fields": []map[string]any{{"name": "summary", "view": "string"}}}
	s := startStack(t, cfg)
	r := do(t, "GET", s.uiURL+"/api/v1/pages", "")
	var pages []ui.Page
	if err := json.Unmarshal([]byte(r.body), &pages); err != nil || len(pages) != 1 || pages[0].Title != "orders" {
		t.Errorf("GET /api/v1/pages = %d %s, want the declared page normalized", r.status, r.body)
	}
	r = do(t, "POST", s.uiURL+"/api/v1/debug/probe", `{"payload":"x"}`)
	var probe struct {
		Tasks []struct {
			Data map[string]any `json:"data"`
		} `json:"tasks"`
		ProbeDetails ui.ProbeDetails `json:"probe_details"`
	}
	if err := json.Unmarshal([]byte(r.body), &probe); err != nil || r.status != http.StatusOK {
		t.Fatalf("probe = %d %s", r.status, r.body)
	}
	if len(probe.ProbeDetails.Fields) != 1 || len(probe.Tasks) != 1 || probe.Tasks[0].Data["summary"] != "ok" {
		t.Errorf("probe = %s, want probe_details and stdout as data", r.body)
	}
}

func TestProbeDataAbsentWhenStdoutIsNotJSON(t *testing.T) {
	t.Parallel()
	s := startStack(t, testConfig(t, "/bin/cat"))
	r := do(t, "POST", s.uiURL+"/api/v1/debug/probe", `{"payload":"plain {text"}`)
	if r.status != 200 || strings.Contains(r.body, `"data"`) || !strings.Contains(r.body, `"probe_details":{"fields":[]}`) {
		t.Errorf("probe = %d %s, want no data and empty probe_details", r.status, r.body)
	}
}
