package root

import (
	"fmt"

	"svc/ui"
	"svc/worker/config"
)

// LoadConfig loads the config file at path as `svc run`, `svc check` and
// every other subcommand do: config.LoadFile with CheckUI, so that one
// error lists every problem, the config's and the ui package's.
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
