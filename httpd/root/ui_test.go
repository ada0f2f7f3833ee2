package root

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"svc/ui"
	"svc/worker"
	"svc/worker/config"
)

// declaring is a Go handler (the exec handler's HTTP hooks) with both
// optional UI hooks.
type declaring struct {
	*worker.ExecHandler
	pages   []ui.Page
	details ui.ProbeDetails
}

func (d declaring) UIPages() []ui.Page            { return d.pages }
func (d declaring) ProbeDetails() ui.ProbeDetails { return d.details }

// httpConfig is an HTTP-only worker on loopback ports the kernel picks.
func httpConfig(t *testing.T, uiOn bool, bases map[string]string) *config.Config {
	t.Helper()
	cfg := config.Default()
	cfg.Executor.BinaryPath = "/bin/cat"
	cfg.Sources.HTTP.Enabled, cfg.Sources.HTTP.Host, cfg.Sources.HTTP.Port = true, "127.0.0.1", 0
	cfg.UI.Enabled, cfg.UI.Port, cfg.UI.LinkBases = uiOn, 0, bases
	cfg.UI.Release.Enabled = false
	cfg.Metrics.Enabled, cfg.RuntimeHealth.Enabled = false, false
	cfg.Storage.Dir = ""
	cfg.Worker.ShutdownTimeout = config.Duration(5 * time.Second)
	cfg.Resolve()
	return &cfg
}

func newDeclaring(cfg *config.Config, pages []ui.Page, details ui.ProbeDetails) declaring {
	return declaring{ExecHandler: worker.NewExecHandler(cfg, worker.NewIDGen()), pages: pages, details: details}
}

// run starts w and returns its UI's base URL; the worker stops at cleanup.
func run(t *testing.T, w *Worker) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return "http://" + w.UIAddr()
}

func TestGoHandlerDeclaresPagesAndProbeDetails(t *testing.T) {
	t.Parallel()
	cfg := httpConfig(t, true, map[string]string{"grafana": "https://g.example.com"})
	h := newDeclaring(cfg,
		[]ui.Page{{Slug: "orders", Widgets: []ui.Widget{
			{View: "table", Columns: ui.Columns{{Name: "id", LinkTemplate: "{shop}/o/{value}"}}, Source: ui.Source{Kind: "tasks"}},
		}}},
		ui.ProbeDetails{Fields: []ui.ProbeField{{Name: "summary", View: "string", Hint: "{wiki}/{value}"}}})
	var logs bytes.Buffer
	w, err := New(context.Background(), cfg, Options{Handler: h, Log: slog.New(slog.NewJSONHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	base := run(t, w)

	var pages []ui.Page
	getJSON(t, "GET", base+"/api/v1/pages", "", &pages)
	if len(pages) != 1 || pages[0].Title != "orders" || pages[0].Widgets[0].Source.Limit == nil ||
		*pages[0].Widgets[0].Source.Limit != ui.DefaultSourceLimit {
		t.Errorf("GET /api/v1/pages = %+v, want the page normalized (title from slug, limit %d)", pages, ui.DefaultSourceLimit)
	}
	var probe struct {
		ProbeDetails ui.ProbeDetails `json:"probe_details"`
	}
	getJSON(t, "POST", base+"/api/v1/debug/probe", `{"payload":"x"}`, &probe)
	if got := probe.ProbeDetails; len(got.Fields) != 1 || got.Fields[0].Name != "summary" {
		t.Errorf("probe_details = %+v, want the declared field", got)
	}

	var warned []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["msg"] == "probe_details_link_bases_missing" {
			warned = append(warned, m)
		}
	}
	if len(warned) != 1 {
		t.Fatalf("probe_details_link_bases_missing logged %d times, want once:\n%s", len(warned), logs.String())
	}
	if got, _ := json.Marshal(warned[0]["bases"]); string(got) != `["shop","wiki"]` {
		t.Errorf("missing bases = %s, want [\"shop\",\"wiki\"]", got)
	}
	if warned[0]["component"] != "worker" {
		t.Errorf("logged with component %v, want worker", warned[0]["component"])
	}
}

func getJSON(t *testing.T, method, url, body string, v any) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || json.Unmarshal(b, v) != nil {
		t.Fatalf("%s %s = %d %s", method, url, resp.StatusCode, b)
	}
}

func TestMissingLinkBasesNotLoggedWithUIOff(t *testing.T) {
	t.Parallel()
	cfg := httpConfig(t, false, nil)
	h := newDeclaring(cfg, nil, ui.ProbeDetails{Fields: []ui.ProbeField{{Name: "s", View: "string", Hint: "{wiki}"}}})
	var logs bytes.Buffer
	w, err := New(context.Background(), cfg, Options{Handler: h, Log: slog.New(slog.NewJSONHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	if strings.Contains(logs.String(), "probe_details_link_bases_missing") {
		t.Errorf("warned with ui.enabled false:\n%s", logs.String())
	}
}

func TestInvalidDeclarationsStopTheWorker(t *testing.T) {
	t.Parallel()
	cfg := httpConfig(t, true, nil)
	_, err := New(context.Background(), cfg, Options{Handler: newDeclaring(cfg, []ui.Page{{Slug: "Bad"}}, ui.ProbeDetails{})})
	var pe *ui.PagesError
	if !errors.As(err, &pe) || !strings.Contains(err.Error(), "slug") || !strings.HasPrefix(err.Error(), "handler root.declaring: ") {
		t.Errorf("New(bad pages) = %v, want *ui.PagesError naming the handler and the slug", err)
	}
	bad := ui.ProbeDetails{Fields: []ui.ProbeField{{Name: "x", View: "custom"}}}
	_, err = New(context.Background(), cfg, Options{Handler: newDeclaring(cfg, nil, bad)})
	var de *ui.ProbeDetailsError
	if !errors.As(err, &de) || !strings.Contains(err.Error(), "renderer") {
		t.Errorf("New(bad details) = %v, want *ui.ProbeDetailsError naming the renderer", err)
	}
	// The exec handler's declarations, set without the loader's check.
	cfg = httpConfig(t, true, nil)
	cfg.Handler.UIPages = []map[string]any{{"slug": "Bad"}}
	_, err = New(context.Background(), cfg, Options{})
	if !errors.As(err, &pe) || !strings.HasPrefix(err.Error(), "handler *worker.ExecHandler: ") {
		t.Errorf("New(bad handler.ui_pages) = %v, want *ui.PagesError naming *worker.ExecHandler", err)
	}
}

func TestExecHandlerDeclaresFromConfig(t *testing.T) {
	t.Parallel()
	cfg, err := LoadConfig("../../testdata/config/valid/ui-pages.toml")
	if err != nil {
		t.Fatal(err)
	}
	pages, details, err := bindUI(cfg, nil, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if len(pages) != 2 {
		t.Errorf("exec handler pages = %d, want the 2 of handler.ui_pages", len(pages))
	}
	if len(details.Fields) == 0 {
		t.Error("exec handler declares no probe details, want handler.probe_details")
	}
}
