package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Bounds of the handler cache and the fleet keys, also documented with
// each key.
const (
	MaxCacheKeyBytes   = 256
	MaxCacheValueBytes = 64 << 10
	MaxCacheRows       = 1_000_000
	MinCacheBytes      = 1 << 20
	MaxCacheBytes      = 16 << 30
	MaxCacheKeysRead   = 16 // handler.cache_keys entries
	MaxStaticPeers     = 256
	MaxPeerURLBytes    = 2048
	MaxTrustedURLs     = 256 // fleet.trusted_urls entries
)

// CacheEnvPrefix starts the variable that carries a cache key's value to
// the executor.
const CacheEnvPrefix = "SVC_CACHE_"

// CacheEnvName is the executor variable of cache key k: SVC_CACHE_ and the
// key upper-cased, other bytes than A-Z, 0-9 and _ made _.
func CacheEnvName(k string) string {
	b := []byte(strings.ToUpper(k))
	for i, c := range b {
		if (c < 'A' || c > 'Z') && (c < '0' || c > '9') && c != '_' {
			b[i] = '_'
		}
	}
	return CacheEnvPrefix + string(b)
}

// resolveFleet fills the fleet defaults that depend on other keys.
func (c *Config) resolveFleet() {
	if c.Fleet.CacheExchange.Enabled == nil {
		on := c.Cache.Enabled
		c.Fleet.CacheExchange.Enabled = &on
	}
	for i := range c.Fleet.Registry.Peers {
		if c.Fleet.Registry.Peers[i].Cluster == "" {
			c.Fleet.Registry.Peers[i].Cluster = "default"
		}
	}
}

// validateFleet checks [cache], handler.cache_keys and [fleet.*].
func (c *Config) validateFleet(p *problems) {
	p.between("cache.max_rows", int64(c.Cache.MaxRows), 1, MaxCacheRows)
	p.between("cache.max_bytes", c.Cache.MaxBytes, MinCacheBytes, MaxCacheBytes)
	keys := c.Handler.CacheKeys
	if len(keys) > 0 && !c.Cache.Enabled {
		p.add("handler.cache_keys", "needs cache.enabled = true")
	}
	if len(keys) > MaxCacheKeysRead {
		p.add("handler.cache_keys", "%d keys; at most %d", len(keys), MaxCacheKeysRead)
	}
	vars := map[string]string{}
	for i, k := range keys {
		key := fmt.Sprintf("handler.cache_keys[%d]", i)
		switch {
		case k == "" || len(k) > MaxCacheKeyBytes:
			p.add(key, "a cache key is 1-%d bytes, got %d", MaxCacheKeyBytes, len(k))
		case !utf8.ValidString(k):
			p.add(key, "a cache key must be UTF-8 text")
		case vars[CacheEnvName(k)] != "":
			p.add(key, "%q and %q both map to the variable %s", vars[CacheEnvName(k)], k, CacheEnvName(k))
		default:
			vars[CacheEnvName(k)] = k
		}
	}

	r := c.Fleet.Registry
	switch r.Provider {
	case "filesystem":
	case "static":
		if len(r.Peers) == 0 {
			p.add("fleet.registry.peers", "the static provider needs at least one peer")
		}
	default:
		p.add("fleet.registry.provider", "%q is not one of filesystem, static", r.Provider)
	}
	p.within("fleet.registry.heartbeat", r.Heartbeat, 100*time.Millisecond, time.Hour)
	p.within("fleet.registry.card_retention", r.CardRetention, time.Minute, 8760*time.Hour)
	if r.CardRetention.D() < 3*r.Heartbeat.D() {
		p.add("fleet.registry.card_retention", "%s is shorter than 3 heartbeats (%s): live cards would be removed", r.CardRetention, Duration(3*r.Heartbeat.D()))
	}
	if len(r.Peers) > MaxStaticPeers {
		p.add("fleet.registry.peers", "%d peers; at most %d", len(r.Peers), MaxStaticPeers)
	}
	names := map[string]bool{}
	for i, peer := range r.Peers {
		key := fmt.Sprintf("fleet.registry.peers[%d]", i)
		switch {
		case peer.Name == "":
			p.add(key, "name is required")
		case !namePattern.MatchString(peer.Name):
			p.add(key+".name", "%q must be 1-64 characters of letters, digits, '.', '_' or '-' starting with a letter or digit", peer.Name)
		case peer.Name == c.Worker.Name:
			p.add(key+".name", "%q is this worker's own name (worker.name)", peer.Name)
		case names[peer.Name]:
			p.add(key+".name", "duplicate peer name %q", peer.Name)
		}
		names[peer.Name] = true
		if !namePattern.MatchString(peer.Cluster) {
			p.add(key+".cluster", "%q must be 1-64 characters of letters, digits, '.', '_' or '-' starting with a letter or digit", peer.Cluster)
		}
		if err := checkPeerURL(peer.URL); err != nil {
			p.add(key+".url", "%v", err)
		}
	}
	x := c.Fleet.CacheExchange
	p.within("fleet.cache_exchange.interval", x.Interval, 100*time.Millisecond, time.Hour)
	p.within("fleet.cache_exchange.timeout", x.Timeout, 100*time.Millisecond, 5*time.Minute)
	if n := len(c.Fleet.TrustedURLs); n > MaxTrustedURLs {
		p.add("fleet.trusted_urls", "%d origins; at most %d", n, MaxTrustedURLs)
	}
	for i, o := range c.Fleet.TrustedURLs {
		if err := checkOrigin(o); err != nil {
			p.add(fmt.Sprintf("fleet.trusted_urls[%d]", i), "%v", err)
		}
	}
}

// checkOrigin accepts an origin as the browser writes it (a trailing "/"
// tolerated), never a wildcard.
func checkOrigin(s string) error {
	bad := fmt.Errorf("%q must be an origin such as https://w2.example.com:8080: http:// or https://, a host name or IP address and an optional port; no path, user info, query, fragment or wildcard", s)
	if len(s) > MaxPeerURLBytes {
		return fmt.Errorf("%d bytes; at most %d", len(s), MaxPeerURLBytes)
	}
	u, err := url.Parse(s)
	if err != nil || Origin(s) == "" || (u.Path != "" && u.Path != "/") || u.RawPath != "" ||
		u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.HasSuffix(u.Host, ":") {
		return bad
	}
	if port := u.Port(); port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("%q: port %s is outside 1-65535", s, port)
		}
	}
	return nil
}

// Origin is the browser origin of an http(s) URL, the form in which
// fleet.trusted_urls and worker URLs are compared: scheme://host[:port],
// lower-cased, without the default port. "" when s is not such a URL,
// carries user info, or its host is not an IP address or a plain name (so
// never a wildcard, which a Content-Security-Policy would widen).
func Origin(s string) string {
	if len(s) > MaxPeerURLBytes {
		return ""
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Opaque != "" || u.User != nil {
		return ""
	}
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if host == "" || !hostName(host) && net.ParseIP(host) == nil {
		return ""
	}
	if (u.Scheme == "http" && port == "80") || (u.Scheme == "https" && port == "443") {
		port = ""
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if port != "" {
		host += ":" + port
	}
	return u.Scheme + "://" + host
}

// hostName reports a DNS-style name: letters, digits, '.', '-', '_'.
func hostName(h string) bool {
	for _, c := range h {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '.' && c != '-' && c != '_' {
			return false
		}
	}
	return true
}

// checkPeerURL accepts an http(s) URL without user info, query or fragment.
func checkPeerURL(s string) error {
	if s == "" {
		return fmt.Errorf("required: the peer's UI server, e.g. http://worker-2:8080")
	}
	if msg := urlProblem(s); msg != "" {
		return errors.New(msg)
	}
	if u, _ := url.Parse(s); u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("%q must not carry user info, a query or a fragment", s)
	}
	return nil
}
