package httpd

import (
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// hostRule is the DNS-rebinding defence of a server bound to loopback: a
// rebound page arrives with the attacker's name in the Host header, so
// such a server answers only names it knows. One bound elsewhere cannot
// know every name it is reached by and relies on its token.
type hostRule struct {
	on      bool
	allowed map[string]bool // extra host names (lowercase, no port)
	key     string          // the config key that lists extra names
}

// newHostRule builds the rule of a server bound to bindHost; publicURL's
// host and the allowed names pass besides loopback names.
func newHostRule(bindHost, publicURL string, allowed []string, key string) hostRule {
	r := hostRule{on: isLoopbackHost(strings.Trim(bindHost, "[]")), allowed: map[string]bool{}, key: key}
	for _, h := range allowed {
		r.allowed[normalHost(h)] = true
	}
	if u, err := url.Parse(publicURL); err == nil && u.Hostname() != "" {
		r.allowed[normalHost(u.Hostname())] = true
	}
	return r
}

// normalHost lowercases a host name and drops a trailing dot and brackets.
func normalHost(h string) string {
	return strings.TrimSuffix(strings.ToLower(strings.Trim(h, "[]")), ".")
}

func (h hostRule) check(r *http.Request) (bool, string) {
	if !h.on {
		return true, ""
	}
	host := r.Host
	if hh, _, err := net.SplitHostPort(host); err == nil {
		host = hh
	}
	host = normalHost(host)
	if isLoopbackHost(host) || h.allowed[host] {
		return true, ""
	}
	return false, "Host " + strconv.Quote(cut(r.Host, 100)) + " is not a name of this worker, which is bound to loopback " +
		"(a DNS-rebinding page would arrive like this); to reach it under that name, add the name to " + h.key
}

func guardHost(rule hostRule, next http.Handler) http.Handler {
	if !rule.on {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ok, detail := rule.check(r); !ok {
			writeError(w, http.StatusForbidden, "host_not_allowed", detail)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

// guardCrossSite refuses a state-changing request a browser sent from
// another site (Sec-Fetch-Site: cross-site, or an Origin originCheck
// refuses), token or not: a "simple" POST needs no CORS preflight.
// Requests without those headers (curl, peers) pass.
func (s *UIServer) guardCrossSite(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if safeMethod(r.Method) {
			next.ServeHTTP(w, r)
			return
		}
		if r.Header.Get("Sec-Fetch-Site") == "cross-site" && !s.originListed(r) {
			writeError(w, http.StatusForbidden, "cross_site_refused",
				"a page of another site may not send "+r.Method+" requests to this worker (Sec-Fetch-Site: cross-site); list its origin in ui.allowed_ws_origins to allow it")
			return
		}
		if ok, reason := s.originCheck(r); !ok {
			writeError(w, http.StatusForbidden, "origin_refused", reason)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (s *UIServer) originListed(r *http.Request) bool {
	origin, _, ok := normalizeOrigin(r.Header.Get("Origin"))
	return ok && s.listed(origin)
}

// cut shortens s for a message.
func cut(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}
