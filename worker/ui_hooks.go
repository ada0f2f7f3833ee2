package worker

import (
	"fmt"

	"svc/ui"
)

// UIPager is an optional handler hook: the UI pages the handler declares,
// routed at /p/<slug> after the built-in pages. It is called once, by New;
// an invalid declaration stops the worker with *ui.PagesError.
type UIPager interface {
	UIPages() []ui.Page
}

// ProbeDetailer is an optional handler hook: how the Debug page renders
// the JSON a probe's executor prints on stdout. It is called once, by New;
// an invalid declaration stops the worker with *ui.ProbeDetailsError.
type ProbeDetailer interface {
	ProbeDetails() ui.ProbeDetails
}

// bindUI reads, validates and normalizes the handler's UI declarations,
// then logs once every link base they use that ui.link_bases lacks.
func (a *App) bindUI(h any) error {
	name := fmt.Sprintf("%T", h)
	if p, ok := h.(UIPager); ok {
		pages := p.UIPages()
		if err := ui.ValidatePages(pages); err != nil {
			return fmt.Errorf("handler %s: %w", name, err)
		}
		a.pages = ui.NormalizePages(pages)
	}
	if p, ok := h.(ProbeDetailer); ok {
		d := p.ProbeDetails()
		if err := ui.ValidateProbeDetails(d); err != nil {
			return fmt.Errorf("handler %s: %w", name, err)
		}
		a.details = d
	}
	if a.details.Fields == nil {
		a.details.Fields = []ui.ProbeField{}
	}
	if a.pages == nil {
		a.pages = []ui.Page{}
	}
	if !a.cfg.UI.Enabled {
		return nil
	}
	if missing := ui.MissingBases(a.cfg.UI.LinkBases, a.pages, a.details); len(missing) > 0 {
		a.log.Warn("probe_details_link_bases_missing", "bases", missing,
			"detail", "templates use link bases that ui.link_bases does not define: their links render as plain text")
	}
	return nil
}

// UIPages returns the handler's declared pages, validated and normalized
// (limits and titles filled in), in declaration order; empty when none.
// Callers must not modify them.
func (a *App) UIPages() []ui.Page { return a.pages }

// ProbeDetails returns the handler's probe-details declaration (no fields
// when none). Callers must not modify it.
func (a *App) ProbeDetails() ui.ProbeDetails { return a.details }

// UIPages implements UIPager from handler.ui_pages.
func (h *ExecHandler) UIPages() []ui.Page { return h.pages }

// ProbeDetails implements ProbeDetailer from handler.probe_details.
func (h *ExecHandler) ProbeDetails() ui.ProbeDetails { return h.details }
