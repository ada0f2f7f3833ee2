package fleet

import (
	"cmp"
	"maps"
	"slices"
	"time"

	"svc/worker/config"
)

// Worker is one entry of the workers list (GET /api/v1/fleet/workers);
// docs/api.md describes each field.
type Worker struct {
	Name     string `json:"name"`
	Cluster  string `json:"cluster"`
	URL      string `json:"url"` // only a LinkURL
	State    string `json:"state"`
	Release  string `json:"release"`
	Provider string `json:"provider"`
	Self     bool   `json:"self"`
	// Trusted says the UI may send its token to URL: this worker, or an
	// origin of this worker, a static peer or fleet.trusted_urls.
	Trusted        bool   `json:"trusted"`
	StartedAtMS    int64  `json:"started_at_ms"`
	HeartbeatMS    int64  `json:"heartbeat_ms"`
	HeartbeatAgeMS *int64 `json:"heartbeat_age_ms"` // by the listing worker's clock
	Load           *Load  `json:"load"`
	CacheMarks     *Marks `json:"cache_marks"`
	instance       string // a card's, for Peers
}

// Peer is a worker the cache exchange may pull.
type Peer struct {
	Name, Cluster, URL string
	// Static peers are pulled every cycle; cards only when Marks moved.
	Static bool
	Marks  *Marks
	// Instance changes when a card's process restarts.
	Instance string
}

// Workers lists this worker, every card of the folder and the static
// peers not named like a card, with states derived now, sorted by cluster
// and name (this worker first among equal names).
func (r *Registry) Workers() []Worker {
	now := r.cfg.Now()
	r.mu.Lock()
	self := r.self
	if self.HeartbeatMS == 0 {
		self.HeartbeatMS = now.UnixMilli()
	}
	contact := maps.Clone(r.contact)
	r.mu.Unlock()
	own := config.Origin(LinkURL(self.URL))
	trusts := func(u string) bool {
		o := config.Origin(u)
		return o != "" && (o == own || r.trusted[o])
	}
	worker := func(c *Card, state, provider string, self bool) Worker {
		u, age := LinkURL(c.URL), max(now.UnixMilli()-c.HeartbeatMS, 0)
		return Worker{
			Name: c.Name, Cluster: c.Cluster, URL: u, State: state, Release: c.Release, Provider: provider, Self: self,
			Trusted: self || trusts(u), StartedAtMS: c.StartedAtMS, HeartbeatMS: c.HeartbeatMS, HeartbeatAgeMS: &age,
			CacheMarks: c.CacheMarks, Load: c.Load, instance: c.Instance,
		}
	}
	out := []Worker{worker(&self, self.State, r.cfg.Provider, true)}
	named := map[string]bool{self.Name: true}
	for _, c := range r.cards(now) {
		named[c.Name] = true
		out = append(out, worker(&c, c.state(now, r.cfg.Heartbeat), ProviderFilesystem, false))
	}
	for _, p := range r.cfg.Peers {
		if named[p.Name] {
			continue
		}
		st := StateUnknown
		if ok, seen := contact[p.Name]; seen && ok {
			st = StateRunning
		} else if seen {
			st = StateUnreachable
		}
		u := LinkURL(p.URL)
		out = append(out, Worker{Name: p.Name, Cluster: p.Cluster, URL: u, State: st, Provider: ProviderStatic, Trusted: trusts(u)})
	}
	slices.SortStableFunc(out, func(a, b Worker) int {
		if c := cmp.Compare(a.Cluster, b.Cluster); c != 0 {
			return c
		}
		return cmp.Compare(a.Name, b.Name)
	})
	return out
}

// Peers lists what the cache exchange may pull: the static peers and the
// live cards of other workers with a link URL.
func (r *Registry) Peers() []Peer {
	var out []Peer
	for _, w := range r.Workers() {
		static := w.Provider == ProviderStatic
		if w.Self || w.Name == r.cfg.Worker ||
			!static && (w.State == StateStopped || w.State == StateUnreachable || w.URL == "") {
			continue
		}
		out = append(out, Peer{Name: w.Name, Cluster: w.Cluster, URL: w.URL, Static: static, Marks: w.CacheMarks, Instance: w.instance})
	}
	return out
}

// TrustedOrigins are the origins of the trusted workers listed, this one
// excepted, each once: the connect sources of the UI's CSP.
func (r *Registry) TrustedOrigins() []string {
	var out []string
	seen := map[string]bool{}
	for _, w := range r.Workers() {
		if o := config.Origin(w.URL); !w.Self && w.Trusted && o != "" && !seen[o] {
			seen[o] = true
			out = append(out, o)
		}
	}
	return out
}

// cards reads every valid card of the folder except this process's own.
func (r *Registry) cards(now time.Time) []Card {
	r.mu.Lock()
	f := r.folder
	r.mu.Unlock()
	if f == nil {
		return nil
	}
	entries, err := r.list(f)
	if err != nil {
		return nil
	}
	var out []Card
	for _, e := range entries {
		if e.temp {
			continue
		}
		c, err := f.read(e.name)
		if err != nil || c.Instance == r.instance {
			continue
		}
		if c.ahead(now) {
			r.reportAhead(c, now)
			continue
		}
		out = append(out, c)
	}
	return out
}

// reportAhead logs fleet_card_clock_ahead once per card name and instance.
func (r *Registry) reportAhead(c Card, now time.Time) {
	r.mu.Lock()
	if r.ahead[c.Name] == c.Instance {
		r.mu.Unlock()
		return
	}
	if len(r.ahead) >= r.cfg.limits.cards {
		clear(r.ahead)
	}
	r.ahead[c.Name] = c.Instance
	r.mu.Unlock()
	r.log.Warn("fleet_card_clock_ahead", "card", c.Name, "instance", c.Instance, "heartbeat_ms", c.HeartbeatMS,
		"started_at_ms", c.StartedAtMS, "now_ms", now.UnixMilli(), "max_skew", MaxClockSkew.String(),
		"detail", "the card's heartbeat or start is further ahead of this worker's clock than the skew allowed: it is not listed or pulled until it is not; sync the hosts' clocks, or find who writes the card folder")
}
