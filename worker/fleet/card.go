// Package fleet is the worker registry: each worker's card in a card
// folder all workers see ({root}/fleet/{worker}.json), plus the static
// peers of the config, read back as the workers list and as the cache
// exchange's peer list. docs/operations.md (The fleet) describes cards,
// states, name conflicts and trust as an operator sees them.
//
// Anyone who can write the folder can write any card, so a card is never
// believed about time past MaxClockSkew ahead of the reader's clock, never
// makes a worker that holds its name yield, and earns no trust with the
// UI token: only origins of this worker, static peers and
// fleet.trusted_urls are trusted (Worker.Trusted, TrustedOrigins).
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

// Card states. Owners write the first four; readers derive unreachable;
// static peers are unknown until the cache exchange reached them.
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
// one's: for cards and for pulled cache rows (package cache).
const MaxClockSkew = 30 * time.Second

// Bounds on what is read from the card folder, which other workers write.
const (
	maxCardBytes   = 16 << 10
	maxCardEntries = 4096  // card files one listing keeps (and temp files apart)
	maxScanEntries = 65536 // names one listing reads in all
	maxURLBytes    = 2048
	maxFieldBytes  = 64
	staleAfter     = 3 // heartbeats a card may miss before it is unreachable
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
	CacheMarks          *Marks `json:"cache_marks"` // null: no cache rows served
	Instance            string `json:"instance"`    // random per start
	// Host, BootID ("" when unknown) and PID name the writing process, so
	// a restarted worker recognises its own dead predecessor.
	Host   string `json:"host,omitempty"`
	BootID string `json:"boot_id,omitempty"`
	PID    int    `json:"pid,omitempty"`
	// Load is the worker's work at its last heartbeat; absent when stopped.
	Load *Load `json:"load,omitempty"`
}

// parseCard decodes and checks the card of file name (without ".json");
// a URL that is no LinkURL is dropped, the card kept.
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

// missed reports whether the card missed staleAfter heartbeats of its
// interval, taken as every when outside lo-hi: a card cannot stay live
// longer by claiming a slow heartbeat.
func (c *Card) missed(now time.Time, lo, hi, every time.Duration) bool {
	if d := time.Duration(c.HeartbeatIntervalMS) * time.Millisecond; d >= lo && d <= hi {
		every = d
	}
	return now.Sub(time.UnixMilli(c.HeartbeatMS)) > staleAfter*every
}

// state derives a card's state at now: one that is not stopped and missed
// its heartbeats (fallback when its interval is not in 100ms-1h) is
// unreachable.
func (c *Card) state(now time.Time, fallback time.Duration) string {
	if c.State != StateStopped && c.missed(now, 100*time.Millisecond, time.Hour, fallback) {
		return StateUnreachable
	}
	return c.State
}

// LinkURL returns s when it is a plain http or https URL with a host (no
// user info, query or fragment, at most 2 KiB), else "".
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
