package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"svc/ui"
	"svc/worker/config"
)

// declaring is a Go handler with both optional UI hooks.
type declaring struct {
	kafkaOnly
	pages   []ui.Page
	details ui.ProbeDetails
}

func (d declaring) UIPages() []ui.Page            { return d.pages }
func (d declaring) ProbeDetails() ui.ProbeDetails { return d.details }

func kafkaConfig(t *testing.T, uiOn bool, bases map[string]string) *config.Config {
	t.Helper()
	cfg := config.Default()
	cfg.Executor.BinaryPath = "/bin/cat"
	cfg.Sources.Kafka.Enabled = true
	cfg.UI.Enabled = uiOn
	cfg.UI.LinkBases = bases
	cfg.Resolve()
	return &cfg
}

type noSinks struct{}

func (noSinks) Deliver(context.Context, *TaskResult) error { return nil }

func okRunner() TaskRunner {
	return runnerFunc(func(_ context.Context, t *Task) TaskResult { return TaskResult{Task: t, Status: StatusOK} })
}

func TestGoHandlerDeclaresPagesAndProbeDetails(t *testing.T) {
	t.Parallel()
	h := declaring{
		pages: []ui.Page{{Slug: "orders", Widgets: []ui.Widget{
			{View: "table", Columns: ui.Columns{{Name: "id", LinkTemplate: "{shop}/o/{value}"}}, Source: ui.Source{Kind: "tasks"}},
		}}},
		details: ui.ProbeDetails{Fields: []ui.ProbeField{{Name: "summary", View: "string", Hint: "{wiki}/{value}"}}},
	}
	var logs bytes.Buffer
	app, err := New(kafkaConfig(t, true, map[string]string{"grafana": "https://g.example.com"}),
		Deps{Handler: h, Runner: okRunner(), Sinks: noSinks{}, Log: slog.New(slog.NewJSONHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	pages := app.UIPages()
	if len(pages) != 1 || pages[0].Title != "orders" || *pages[0].Widgets[0].Source.Limit != ui.DefaultSourceLimit {
		t.Errorf("UIPages() = %+v, want the page normalized (title from slug, limit %d)", pages, ui.DefaultSourceLimit)
	}
	if got := app.ProbeDetails(); len(got.Fields) != 1 || got.Fields[0].Name != "summary" {
		t.Errorf("ProbeDetails() = %+v", got)
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
}

func TestMissingLinkBasesNotLoggedWithUIOff(t *testing.T) {
	t.Parallel()
	h := declaring{details: ui.ProbeDetails{Fields: []ui.ProbeField{{Name: "s", View: "string", Hint: "{wiki}"}}}}
	var logs bytes.Buffer
	if _, err := New(kafkaConfig(t, false, nil), Deps{Handler: h, Runner: okRunner(), Sinks: noSinks{}, Log: slog.New(slog.NewJSONHandler(&logs, nil))}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(logs.String(), "probe_details_link_bases_missing") {
		t.Errorf("warned with ui.enabled false:\n%s", logs.String())
	}
}

func TestInvalidDeclarationsStopTheWorker(t *testing.T) {
	t.Parallel()
	badPages := declaring{pages: []ui.Page{{Slug: "Bad"}}}
	_, err := New(kafkaConfig(t, true, nil), Deps{Handler: badPages, Runner: okRunner(), Sinks: noSinks{}})
	var pe *ui.PagesError
	if !errors.As(err, &pe) || !strings.Contains(err.Error(), "slug") {
		t.Errorf("New(bad pages) = %v, want *ui.PagesError naming the slug", err)
	}
	badDetails := declaring{details: ui.ProbeDetails{Fields: []ui.ProbeField{{Name: "x", View: "custom"}}}}
	_, err = New(kafkaConfig(t, true, nil), Deps{Handler: badDetails, Runner: okRunner(), Sinks: noSinks{}})
	var de *ui.ProbeDetailsError
	if !errors.As(err, &de) || !strings.Contains(err.Error(), "renderer") {
		t.Errorf("New(bad details) = %v, want *ui.ProbeDetailsError naming the renderer", err)
	}
}

func TestExecHandlerDeclaresFromConfig(t *testing.T) {
	t.Parallel()
	cfg, err := config.LoadFile("../testdata/config/valid/ui-pages.toml")
	if err != nil {
		t.Fatal(err)
	}
	app, err := New(cfg, Deps{Runner: okRunner()})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(app.UIPages()); n != 2 {
		t.Errorf("exec handler pages = %d, want the 2 of handler.ui_pages", n)
	}
	if n := len(app.ProbeDetails().Fields); n == 0 {
		t.Error("exec handler declares no probe details, want handler.probe_details")
	}
}
