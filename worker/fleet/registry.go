package fleet

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"svc/worker/config"
)

// Status is what the registry reads of the worker's own state; *worker.App
// implements it. Both methods are safe for concurrent use.
type Status interface {
	Ready() (bool, []string)
	Closing() bool
}

// Config is what a Registry needs.
type Config struct {
	Worker, Cluster string
	Release         string
	StartedAt       time.Time
	Provider        string           // fleet.registry.provider: filesystem or static
	Root            string           // shared.dir, else storage.dir; "": no card folder
	Heartbeat       time.Duration    // fleet.registry.heartbeat
	Retention       time.Duration    // fleet.registry.card_retention
	Peers           []config.Peer    // fleet.registry.peers
	Trusted         []string         // fleet.trusted_urls: see Worker.Trusted
	URL             func() string    // the card URL, called once Run starts
	Status          Status           // nil: running from the start
	Marks           func() *Marks    // nil or returning nil: no cache rows served
	Load            func() *Load     // the card's load, called at each heartbeat; nil: none
	Logger          *slog.Logger     // nil discards
	Now             func() time.Time // nil: time.Now

	// Tests set these: listing bounds (0: the defaults), the process put
	// on the card (zero: this one) and whether a pid lives (nil: processAlive).
	limits limits
	proc   proc
	alive  func(pid int) bool
}

// Registry keeps this worker's card and lists the fleet. Every method is
// safe for concurrent use.
type Registry struct {
	cfg      Config
	log      *slog.Logger
	instance string
	trusted  map[string]bool // origins of fleet.trusted_urls and the static peers

	mu        sync.Mutex
	self      Card              // the card as last written (or yielded)
	held      bool              // this worker wrote its card: it holds its name
	yielding  bool              // another live process owns our name's card
	conflict  string            // instance of the last foreign card of our name reported
	ahead     map[string]string // card name → instance reported as from the future
	truncated bool              // the last listing of the folder hit a bound
	contact   map[string]bool   // static peer name → last exchange request ok
	folder    *folder
}

// New returns the registry of cfg.
func New(cfg Config) *Registry {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.URL == nil {
		cfg.URL = func() string { return "" }
	}
	if cfg.Marks == nil {
		cfg.Marks = func() *Marks { return nil }
	}
	if cfg.Load == nil {
		cfg.Load = func() *Load { return nil }
	}
	if cfg.limits.cards <= 0 {
		cfg.limits.cards = maxCardEntries
	}
	if cfg.limits.scan <= 0 {
		cfg.limits.scan = maxScanEntries
	}
	if cfg.proc.pid == 0 {
		cfg.proc = thisProcess()
	}
	if cfg.alive == nil {
		cfg.alive = processAlive
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	r := &Registry{cfg: cfg, log: cfg.Logger.With("component", "fleet"), instance: hex.EncodeToString(b[:]),
		contact: map[string]bool{}, ahead: map[string]string{}, trusted: map[string]bool{}}
	urls := slices.Clone(cfg.Trusted)
	for _, p := range cfg.Peers {
		urls = append(urls, LinkURL(p.URL))
	}
	for _, u := range urls {
		if o := config.Origin(u); o != "" {
			r.trusted[o] = true
		}
	}
	r.self = Card{
		Name: cfg.Worker, Cluster: cfg.Cluster, State: StateStarting, Release: printable(cfg.Release),
		StartedAtMS: cfg.StartedAt.UnixMilli(), HeartbeatIntervalMS: cfg.Heartbeat.Milliseconds(), Instance: r.instance,
		Host: cfg.proc.host, BootID: cfg.proc.bootID, PID: cfg.proc.pid,
	}
	return r
}

// Run writes the card every heartbeat and whenever the state or the cache
// marks change (checked every quarter second at most), removes cards past
// their retention, and writes the card as stopped when ctx ends. Without a
// usable card folder the worker lists itself and its static peers.
func (r *Registry) Run(ctx context.Context) error {
	r.mu.Lock()
	r.self.URL = r.cfg.URL()
	r.mu.Unlock()
	if r.cfg.Provider == ProviderFilesystem && r.cfg.Root != "" {
		f, err := openFolder(r.cfg.Root)
		if err != nil {
			r.log.Warn("fleet_card_folder_unavailable", "root", r.cfg.Root, "error", err.Error(),
				"detail", "this worker writes no card and lists only itself and its static peers")
		} else {
			r.mu.Lock()
			r.folder = f
			r.mu.Unlock()
			defer func() {
				r.mu.Lock()
				r.folder = nil
				r.mu.Unlock()
				f.close()
			}()
		}
	}
	poll := min(r.cfg.Heartbeat, 250*time.Millisecond)
	t := time.NewTicker(poll)
	defer t.Stop()
	var lastWrite, lastSweep time.Time
	for {
		now := r.cfg.Now()
		state, marks := r.ownState(), r.cfg.Marks()
		r.mu.Lock()
		changed := state != r.self.State || !sameMarks(marks, r.self.CacheMarks)
		r.mu.Unlock()
		if changed || now.Sub(lastWrite) >= r.cfg.Heartbeat {
			r.publish(state, marks, r.cfg.Load(), now)
			lastWrite = now
		}
		if now.Sub(lastSweep) >= r.cfg.Heartbeat {
			r.sweep(now)
			lastSweep = now
		}
		select {
		case <-ctx.Done():
			r.publish(StateStopped, r.cfg.Marks(), nil, r.cfg.Now()) // a stopped worker has no work
			return nil
		case <-t.C:
		}
	}
}

// ownState derives this worker's state: starting until it was first
// ready, then running, draining once a drain began.
func (r *Registry) ownState() string {
	r.mu.Lock()
	prev := r.self.State
	r.mu.Unlock()
	st := r.cfg.Status
	switch {
	case st == nil:
		return StateRunning
	case st.Closing():
		return StateDraining
	case prev == StateRunning:
		return StateRunning
	}
	if ok, _ := st.Ready(); ok {
		return StateRunning
	}
	return StateStarting
}

func sameMarks(a, b *Marks) bool {
	return (a == nil && b == nil) || (a != nil && b != nil && *a == *b)
}

// publish updates the card and writes it unless claim says not to.
func (r *Registry) publish(state string, marks *Marks, load *Load, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.self.State, r.self.CacheMarks, r.self.Load, r.self.HeartbeatMS = state, marks, load, now.UnixMilli()
	if r.folder == nil || !r.claim(now) {
		return
	}
	card := r.self
	if err := r.folder.write(&card); err != nil {
		r.log.Warn("fleet_card_write_failed", "error", err.Error())
		return
	}
	r.held = true
}

// Actions of fleet_name_conflict and reasons of fleet_card_taken_over.
const (
	actionYielded     = "yielded"     // this worker writes no card while the other lives
	actionOverwritten = "overwritten" // this worker writes its card over the other
	reasonGone        = "other_stopped_or_unreachable"
	reasonPredecessor = "previous_instance_dead"
)

// claim reports whether this worker may write its card now, reading the
// card of its name (mu held): a worker that holds its name never yields
// it; a newcomer yields to another live card, except one its own dead
// predecessor left or one stamped ahead of its clock.
func (r *Registry) claim(now time.Time) bool {
	c, err := r.folder.read(r.cfg.Worker)
	if err != nil || c.Instance == r.instance {
		r.takeOver(reasonGone)
		return true
	}
	switch {
	case r.held:
		r.reportConflict(c, actionOverwritten, "a card of this worker's name that it did not write: this worker holds the name and writes its card over it; give each worker its own worker.name, and check who writes the card folder")
	case c.State == StateStopped:
		r.takeOver(reasonGone)
	case r.predecessor(c):
		r.yielding = true // log the take-over
		r.takeOver(reasonPredecessor)
	case c.ahead(now):
		r.reportConflict(c, actionOverwritten, fmt.Sprintf("a card of this worker's name stamped more than %s ahead of this worker's clock is not believed: this worker writes its card over it", MaxClockSkew))
	case c.missed(now, 1, r.cfg.Heartbeat, r.cfg.Heartbeat): // own interval at most
		r.takeOver(reasonGone)
	default:
		r.reportConflict(c, actionYielded, "another live worker of this name wrote its card first; this one writes no card until that one stops or turns unreachable: give each worker its own worker.name")
		r.yielding = true
		return false
	}
	return true
}

// predecessor reports whether c was written on this host and boot by a
// process that is gone or whose pid is this one's (a restarted container).
func (r *Registry) predecessor(c Card) bool {
	p := r.cfg.proc
	return c.PID > 0 && p.host != "" && c.Host == p.host && c.BootID == p.bootID &&
		(c.PID == p.pid || !r.cfg.alive(c.PID))
}

// takeOver ends a yield, logging why (mu held).
func (r *Registry) takeOver(reason string) {
	if !r.yielding {
		return
	}
	detail := "the other worker of this name stopped or turned unreachable"
	if reason == reasonPredecessor {
		detail = "the card was left by an earlier process of this name on this host, which is gone (a restart)"
	}
	r.log.Info("fleet_card_taken_over", "worker", r.cfg.Worker, "reason", reason, "detail", detail)
	r.yielding = false
}

// reportConflict logs fleet_name_conflict once per other instance (mu held).
func (r *Registry) reportConflict(c Card, action, detail string) {
	if c.Instance == r.conflict {
		return
	}
	r.conflict = c.Instance
	r.log.Error("fleet_name_conflict", "worker", r.cfg.Worker, "action", action, "other_url", c.URL,
		"other_started_at_ms", c.StartedAtMS, "other_heartbeat_ms", c.HeartbeatMS, "other_instance", c.Instance,
		"other_host", c.Host, "other_pid", c.PID, "detail", detail)
}

// sweep removes other workers' cards whose heartbeat is older than the
// retention, and temp files as old.
func (r *Registry) sweep(now time.Time) {
	r.mu.Lock()
	f := r.folder
	r.mu.Unlock()
	if f == nil {
		return
	}
	entries, err := r.list(f)
	if err != nil {
		r.log.Warn("fleet_card_folder_unreadable", "error", err.Error())
		return
	}
	for _, e := range entries {
		if e.name == r.cfg.Worker {
			continue
		}
		seen := e.mod // temp files, unreadable cards and cards from the future: the file's time
		if !e.temp {
			if c, err := f.read(e.name); err == nil && !c.ahead(now) {
				seen = time.UnixMilli(c.HeartbeatMS)
			}
		}
		if !seen.IsZero() && now.Sub(seen) > r.cfg.Retention {
			if err := f.remove(e.file); err == nil {
				r.log.Info("fleet_card_removed", "file", e.file, "last_seen_ms", seen.UnixMilli(), "retention", config.Duration(r.cfg.Retention).String())
			}
		}
	}
}

// list lists f within the configured limits, logging
// fleet_card_folder_truncated when listings start hitting a bound.
func (r *Registry) list(f *folder) ([]entry, error) {
	entries, truncated, err := f.list(r.cfg.limits)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	was := r.truncated
	r.truncated = truncated
	r.mu.Unlock()
	if truncated && !was {
		r.log.Warn("fleet_card_folder_truncated", "folder", f.path, "max_cards", r.cfg.limits.cards, "max_names", r.cfg.limits.scan,
			"detail", "the card folder holds more names than one listing reads: some cards may be left out; remove what is not a card")
	}
	return entries, nil
}

// Contacted records the outcome of the cache exchange's last request to
// a static peer, which is that peer's state in the workers list.
func (r *Registry) Contacted(name string, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.contact[name] = ok
}
