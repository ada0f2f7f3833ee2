package httpd

import (
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// originAllowed reports whether the page named by r's Origin may use /ws
// or read a CORS route: the one rule, originCheck.
func (s *UIServer) originAllowed(r *http.Request) bool {
	ok, _ := s.originCheck(r)
	return ok
}

// originCheck is originAllowed with the reason, for logs and 403 bodies
// (the table: docs/api.md, "CORS and origins"). In order:
//
//  1. No Origin: not a page (the token gate alone decides).
//  2. Not a plain http(s) origin ("null", repeated headers): refused.
//  3. ui.allowed_ws_origins set: a strict allowlist.
//  4. Token set: only the own origin (Host, or ui.public_url); a
//     DNS-rebound page can forge the Host, not the token.
//  5. No token: all but a page not on loopback reaching a worker over
//     loopback, checked before any same-origin test since a rebound page
//     is "same-origin" by Host.
func (s *UIServer) originCheck(r *http.Request) (bool, string) {
	values := r.Header.Values("Origin")
	if len(values) == 0 || len(values) == 1 && values[0] == "" {
		return true, "no Origin header"
	}
	if len(values) > 1 {
		return false, "more than one Origin header"
	}
	origin, host, ok := normalizeOrigin(values[0])
	if !ok {
		return false, "Origin " + quoteOrigin(values[0]) + " is not an http or https origin"
	}
	if len(s.cfg.UI.AllowedWSOrigins) > 0 {
		if s.listed(origin) {
			return true, "origin listed in ui.allowed_ws_origins"
		}
		return false, "origin " + origin + " is not listed in ui.allowed_ws_origins"
	}
	if s.cfg.UI.AuthToken != "" {
		if s.isOwnOrigin(r, origin) {
			return true, "same origin"
		}
		return false, "cross-origin request refused: ui.auth_token is set and ui.allowed_ws_origins is empty"
	}
	if arrivedOnLoopback(r) && !isLoopbackHost(host) {
		return false, "a page not on loopback (" + origin + ") cannot reach a worker over loopback; list it in ui.allowed_ws_origins"
	}
	return true, "untokened worker accepts cross-origin pages"
}

// listed reports a normalised origin listed in ui.allowed_ws_origins.
func (s *UIServer) listed(origin string) bool {
	return slices.ContainsFunc(s.cfg.UI.AllowedWSOrigins, func(o string) bool {
		n, _, ok := normalizeOrigin(o)
		return ok && n == origin
	})
}

// isOwnOrigin reports whether origin is the worker's own: the Host header
// the request was sent to, or the configured ui.public_url.
func (s *UIServer) isOwnOrigin(r *http.Request, origin string) bool {
	if own, _, ok := normalizeOrigin("http://" + r.Host); ok && own == origin {
		return true
	}
	if pub := s.cfg.UI.PublicURL; pub != "" {
		if u, err := url.Parse(pub); err == nil {
			if own, _, ok := normalizeOrigin(u.Scheme + "://" + u.Host); ok && own == origin {
				return true
			}
		}
	}
	return false
}

// normalizeOrigin parses an RFC 6454 origin ("scheme://host[:port]") and
// returns its canonical form and bare host (lowercase, no brackets). ok is
// false for anything else: "null", other schemes, user info, a path, query
// or fragment, an empty host or a bad port.
func normalizeOrigin(raw string) (origin, host string, ok bool) {
	u, err := url.Parse(raw)
	if err != nil || u.Opaque != "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.ForceQuery {
		return "", "", false
	}
	if u.Path != "" && u.Path != "/" {
		return "", "", false
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme != "http" && scheme != "https" {
		return "", "", false
	}
	host = strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	port := u.Port()
	if host == "" || strings.HasSuffix(u.Host, ":") {
		return "", "", false
	}
	if strings.Contains(host, ":") && net.ParseIP(host) == nil {
		return "", "", false
	}
	if port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 {
			return "", "", false
		}
		port = strconv.Itoa(n)
	}
	if scheme == "http" && port == "80" || scheme == "https" && port == "443" {
		port = ""
	}
	hostport := host
	if port != "" {
		hostport = net.JoinHostPort(host, port)
	} else if strings.Contains(host, ":") {
		hostport = "[" + host + "]"
	}
	return scheme + "://" + hostport, host, true
}

// arrivedOnLoopback reports a request that reached the worker over
// loopback: by the connection's local address or the Host header (a
// tunnel on the browser's machine).
func arrivedOnLoopback(r *http.Request) bool {
	if a, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		if host, _, err := net.SplitHostPort(a.String()); err == nil && isLoopbackHost(host) {
			return true
		}
	}
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	return isLoopbackHost(strings.Trim(host, "[]"))
}

// isLoopbackHost reports localhost, *.localhost (browsers resolve both to
// loopback), 127.0.0.0/8 and ::1, including IPv4-mapped forms.
func isLoopbackHost(host string) bool {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	if i := strings.IndexByte(host, '%'); i >= 0 {
		host = host[:i] // zone of a link-local literal
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// quoteOrigin quotes a refused Origin for a message, cut to a sane length.
func quoteOrigin(v string) string { return strconv.Quote(cut(v, 100)) }
