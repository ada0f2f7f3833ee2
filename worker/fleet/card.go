// Package fleet is the worker registry: each worker's card (name,
// cluster, URL, state, release, cache marks, heartbeat) in a card folder
// all workers see, plus the static peers of the config, read back as the
// workers list and as the cache exchange's peer list.
//
// # Cards
//
// A filesystem card is {root}/fleet/{worker}.json, root being shared.dir,
// else storage.dir. Its owner rewrites it every heartbeat and at each
// state change (temp file, fsync, rename; files 0600, the folder 0700). A
// reader derives "unreachable" from a card whose heartbeat is older than
// three of its owner's intervals; any worker removes cards older than
// fleet.registry.card_retention. A card holds no secret: its URL loses
// user info, query and fragment.
//
// # Clocks
//
// Anyone who can write the folder can write any card, so nothing a card
// says about time is believed past MaxClockSkew ahead of the reader's
// clock: a card whose heartbeat_ms or started_at_ms is further ahead is
// neither listed nor pulled nor yielded to, and is reported once
// (fleet_card_clock_ahead).
//
// # One name, two workers
//
// A worker that has written its card holds its name: a card of its name
// that it did not write (another instance id) is reported
// (fleet_name_conflict, action "overwritten") and overwritten at its next
// heartbeat, never yielded to, whatever times it claims. A worker that
// has not written its card yet yields to a live card of another process
// (fleet_name_conflict, action "yielded": it writes no card while that
// one lives, judged with its own heartbeat interval at most) unless that
// card is provably its own dead predecessor: written on this host (host
// name and boot id) by a pid that is gone or is this process's own. That
// card is taken over at once (fleet_card_taken_over, reason
// "previous_instance_dead"), so a restart after SIGKILL is listed at once.
//
// # Trust
//
// Anyone who can write the card folder can write a card naming any URL,
// so a card earns no trust with the UI token. A listed worker is trusted
// (Worker.Trusted) when it is this worker or its URL's origin is this
// worker's, a static peer's or in fleet.trusted_urls; only trusted
// origins become the pages' connect sources (TrustedOrigins), and the
// Live page opens sockets to those alone. The cache exchange is not
// affected: it carries no token.
package fleet

import (
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strings"
	"time"
	"unicode"
)

// Card states. Owners write starting, running, draining and stopped;
// readers derive unreachable. Static peers are unknown until the cache
// exchange has reached them.
const (
	StateStarting    = "starting"
	StateRunning     = "running"
	StateDraining    = "draining"
	StateStopped     = "stopped"
	StateUnreachable = "unreachable"
	StateUnknown     = "unknown"
)

// Providers of a listed worker.
const (
	ProviderFilesystem = "filesystem"
	ProviderStatic     = "static"
)

// MaxClockSkew is how far another worker's clock may run ahead of this
// one's: a card stamped further ahead is not believed, and a cache row
// pulled from a peer is stamped at most this far ahead (package cache).
const MaxClockSkew = 30 * time.Second

// Bounds on what is read from the card folder, which other workers write.
const (
	maxCardBytes = 16 << 10
	// maxCardEntries is how many card files one listing keeps (and, apart
	// from them, how many temp files); names of anything else do not
	// count.
	maxCardEntries = 4096
	// maxScanEntries is how many names one listing reads in all, so a
	// folder stuffed with other files costs bounded time and memory.
	maxScanEntries = 65536
	maxURLBytes    = 2048
	maxFieldBytes  = 64
	// staleAfter is how many of its owner's heartbeats a card may miss
	// before readers report it unreachable.
	staleAfter = 3
)

var namePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// Marks are the timestamps of a worker's newest cluster and global cache
// writes; a puller pulls a card again only when they moved.
type Marks struct {
	Cluster int64 `json:"cluster"`
	Global  int64 `json:"global"`
}

// Card is one worker's entry in the card folder.
type Card struct {
	Name                string `json:"name"`
	Cluster             string `json:"cluster"`
	URL                 string `json:"url"`
	State               string `json:"state"`
	Release             string `json:"release"`
	StartedAtMS         int64  `json:"started_at_ms"`
	HeartbeatMS         int64  `json:"heartbeat_ms"`
	HeartbeatIntervalMS int64  `json:"heartbeat_interval_ms"`
	// CacheMarks is null when the worker serves no cache rows.
	CacheMarks *Marks `json:"cache_marks"`
	// Instance tells two processes of one name apart (random per start).
	Instance string `json:"instance"`
	// Host (host name), BootID (the kernel's boot id, "" when unknown)
	// and PID name the process that wrote the card, so a restarted worker
	// recognises its own dead predecessor. Cards of earlier releases lack
	// them (empty, 0): nothing is proven about such a card.
	Host   string `json:"host,omitempty"`
	BootID string `json:"boot_id,omitempty"`
	PID    int    `json:"pid,omitempty"`
	// Load is the worker's work at its last heartbeat; absent from cards
	// of earlier releases and of stopped workers.
	Load *Load `json:"load,omitempty"`
}

// parseCard decodes and checks a card read from file name (without
// ".json"). A URL that is not a plain http(s) URL is dropped, the card
// kept.
func parseCard(name string, data []byte) (Card, error) {
	var c Card
	if err := json.Unmarshal(data, &c); err != nil {
		return Card{}, fmt.Errorf("card %s: %w", name, err)
	}
	switch {
	case c.Name != name || !namePattern.MatchString(c.Name):
		return Card{}, fmt.Errorf("card %s: name %q does not match its file", name, c.Name)
	case !namePattern.MatchString(c.Cluster):
		return Card{}, fmt.Errorf("card %s: bad cluster", name)
	case c.State != StateStarting && c.State != StateRunning && c.State != StateDraining && c.State != StateStopped:
		return Card{}, fmt.Errorf("card %s: bad state", name)
	case c.HeartbeatMS <= 0 || c.StartedAtMS < 0 || len(c.Instance) > maxFieldBytes:
		return Card{}, fmt.Errorf("card %s: bad heartbeat, start or instance", name)
	case c.PID < 0 || len(c.Host) > maxFieldBytes || len(c.BootID) > maxFieldBytes:
		return Card{}, fmt.Errorf("card %s: bad pid, host or boot id", name)
	case c.CacheMarks != nil && (c.CacheMarks.Cluster < 0 || c.CacheMarks.Global < 0):
		return Card{}, fmt.Errorf("card %s: bad cache marks", name)
	}
	c.Release, c.Host, c.BootID = printable(c.Release), printable(c.Host), printable(c.BootID)
	c.Load = c.Load.clean() // an implausible load is dropped, the card kept
	c.URL = LinkURL(c.URL)
	return c, nil
}

// ahead reports whether the card claims a heartbeat or a start more than
// MaxClockSkew after now: such a card is not believed.
func (c *Card) ahead(now time.Time) bool {
	limit := now.Add(MaxClockSkew).UnixMilli()
	return c.HeartbeatMS > limit || c.StartedAtMS > limit
}

// stale reports whether a card that is not stopped missed staleAfter
// heartbeats, its interval taken at most as own: a card cannot stay live
// longer by claiming a slow heartbeat.
func (c *Card) stale(now time.Time, own time.Duration) bool {
	every := time.Duration(c.HeartbeatIntervalMS) * time.Millisecond
	if every <= 0 || every > own {
		every = own
	}
	return now.Sub(time.UnixMilli(c.HeartbeatMS)) > staleAfter*every
}

// state derives a card's state at now: a card that is not stopped and
// missed staleAfter heartbeats of its owner's interval (fallback when the
// card states none in 100ms-1h) is unreachable.
func (c *Card) state(now time.Time, fallback time.Duration) string {
	if c.State == StateStopped {
		return c.State
	}
	every := time.Duration(c.HeartbeatIntervalMS) * time.Millisecond
	if every < 100*time.Millisecond || every > time.Hour {
		every = fallback
	}
	if now.Sub(time.UnixMilli(c.HeartbeatMS)) > staleAfter*every {
		return StateUnreachable
	}
	return c.State
}

// LinkURL returns s when it is a plain http or https URL with a host (no
// user info, query or fragment, at most 2 KiB), else "": only such URLs
// are returned as links or pulled.
func LinkURL(s string) string {
	if len(s) > maxURLBytes {
		return ""
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
		u.User != nil || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || u.Opaque != "" {
		return ""
	}
	return s
}

// CardURL is the URL a worker puts on its card: ui.public_url without user
// info, query or fragment, else http://<bind address>, an unspecified bind
// host (0.0.0.0, ::) replaced by hostname.
func CardURL(publicURL, bind, hostname string) string {
	if publicURL != "" {
		u, err := url.Parse(publicURL)
		if err != nil {
			return ""
		}
		u.User, u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = nil, "", false, "", ""
		return LinkURL(u.String())
	}
	host, port, err := net.SplitHostPort(bind)
	if err != nil {
		return ""
	}
	if ip := net.ParseIP(host); (host == "" || (ip != nil && ip.IsUnspecified())) && hostname != "" {
		host = hostname
	}
	return LinkURL("http://" + net.JoinHostPort(host, port))
}

// printable keeps at most maxFieldBytes of s's printable runes.
func printable(s string) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsPrint(r) {
			return r
		}
		return -1
	}, s)
	if len(s) > maxFieldBytes {
		s = strings.ToValidUTF8(s[:maxFieldBytes], "")
	}
	return s
}
