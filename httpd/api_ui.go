package httpd

import (
	"maps"
	"net/http"

	"svc/worker/config"
)

// UILinks are the identity fields the SPA builds links from.
type UILinks struct {
	// Prometheus is absent when ui.prometheus_url is unset (no links).
	Prometheus *PrometheusLinks `json:"prometheus,omitempty"`
	// CustomLinks are ui.custom_links, in order (http(s) only).
	CustomLinks []config.CustomLink `json:"custom_links"`
	// LinkBases are ui.link_bases without trailing '/', for link templates.
	LinkBases map[string]string `json:"link_bases"`
}

// PrometheusLinks give the Dashboard's Prometheus deep links: URL is
// ui.prometheus_url; a label name that is set selects this worker (its
// name) or cluster in the query.
type PrometheusLinks struct {
	URL          string `json:"url"`
	WorkerLabel  string `json:"worker_label,omitempty"`
	ClusterLabel string `json:"cluster_label,omitempty"`
}

func (s *UIServer) uiLinks() UILinks {
	u := s.cfg.UI
	out := UILinks{CustomLinks: []config.CustomLink{}, LinkBases: map[string]string{}}
	if safeHTTPURL(u.PrometheusURL) {
		out.Prometheus = &PrometheusLinks{URL: u.PrometheusURL, WorkerLabel: u.PrometheusWorkerLabel, ClusterLabel: u.PrometheusClusterLabel}
	}
	for _, l := range u.CustomLinks {
		if safeHTTPURL(l.URL) {
			out.CustomLinks = append(out.CustomLinks, l)
		}
	}
	maps.Copy(out.LinkBases, u.LinkBases)
	return out
}

// safeHTTPURL reports an absolute http(s) URL: the UI links nothing else.
func safeHTTPURL(s string) bool {
	return len(s) > 8 && (s[:7] == "http://" || s[:8] == "https://")
}

// pages serves GET /api/v1/pages: the handler's declared pages, validated
// and normalized, in declaration order; [] when none.
func (s *UIServer) pages(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.uiPages)
}
