package root

import (
	"fmt"
	"log/slog"

	"svc/ui"
	"svc/worker"
	"svc/worker/config"
)

// LoadConfig loads the config file at path as every subcommand does: one
// error lists every problem, the config's and the ui package's (CheckUI).
func LoadConfig(path string) (*config.Config, error) {
	return config.LoadFile(path, CheckUI)
}

// CheckUI validates the keys whose rules package ui owns: ui.link_bases,
// ui.release.version, and the exec handler's declared pages and probe
// details (plain tables in the config, read into the ui model here).
func CheckUI(c *config.Config) []string {
	p := ui.CheckLinkBases(c.UI.LinkBases)
	if v := c.UI.Release.Version; v != "" && ui.CheckTag(v) != nil {
		p = append(p, fmt.Sprintf("ui.release.version: %q must be a release tag vX.Y.Z (empty: the release embedded in this binary)", v))
	}
	var pages []ui.Page
	var details ui.ProbeDetails
	p = append(p, c.DecodeTables("handler.ui_pages", c.Handler.UIPages, &pages)...)
	p = append(p, c.DecodeTables("handler.probe_details", c.Handler.ProbeDetails, &details)...)
	return append(p, ui.CheckDeclarations(pages, details)...)
}

// bindUI reads, validates and normalizes the handler's UI declarations: a
// Go handler's hooks (ui.Pager, ui.ProbeDetailer) or, for the built-in
// exec handler (h nil), handler.ui_pages and handler.probe_details. With
// the UI on it logs once every link base they use that ui.link_bases
// lacks. An invalid declaration stops the worker.
func bindUI(cfg *config.Config, h any, log *slog.Logger) ([]ui.Page, ui.ProbeDetails, error) {
	var pages []ui.Page
	var details ui.ProbeDetails
	if h == nil {
		h = (*worker.ExecHandler)(nil)
		problems := cfg.DecodeTables("handler.ui_pages", cfg.Handler.UIPages, &pages)
		problems = append(problems, cfg.DecodeTables("handler.probe_details", cfg.Handler.ProbeDetails, &details)...)
		if len(problems) > 0 {
			return nil, details, &config.Error{Problems: problems}
		}
	}
	if p, ok := h.(ui.Pager); ok {
		pages = p.UIPages()
	}
	if p, ok := h.(ui.ProbeDetailer); ok {
		details = p.ProbeDetails()
	}
	if err := ui.ValidatePages(pages); err != nil {
		return nil, details, fmt.Errorf("handler %T: %w", h, err)
	}
	if err := ui.ValidateProbeDetails(details); err != nil {
		return nil, details, fmt.Errorf("handler %T: %w", h, err)
	}
	pages = ui.NormalizePages(pages)
	if details.Fields == nil {
		details.Fields = []ui.ProbeField{}
	}
	if cfg.UI.Enabled {
		if missing := ui.MissingBases(cfg.UI.LinkBases, pages, details); len(missing) > 0 {
			log.Warn("probe_details_link_bases_missing", "bases", missing,
				"detail", "templates use link bases that ui.link_bases does not define: their links render as plain text")
		}
	}
	return pages, details, nil
}
