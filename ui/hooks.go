package ui

// Pager is an optional Go handler hook: the UI pages the handler declares,
// routed at /p/<slug> after the built-in pages. The composition root calls
// it once; an invalid declaration stops the worker with *PagesError.
type Pager interface {
	UIPages() []Page
}

// ProbeDetailer is an optional Go handler hook: how the Debug page renders
// the JSON a probe's executor prints on stdout. The composition root calls
// it once; an invalid declaration stops the worker with *ProbeDetailsError.
type ProbeDetailer interface {
	ProbeDetails() ProbeDetails
}
