package httpd

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"svc/worker/config"
)

func TestOriginNormalize(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in, want, host string
	}{
		{"http://Example.COM", "http://example.com", "example.com"},
		{"HTTP://example.com:80", "http://example.com", "example.com"},
		{"https://example.com:443", "https://example.com", "example.com"},
		{"https://example.com:80", "https://example.com:80", "example.com"},
		{"http://example.com:443", "http://example.com:443", "example.com"},
		{"http://example.com:8080/", "http://example.com:8080", "example.com"},
		{"http://example.com.:8080", "http://example.com:8080", "example.com"},
		{"http://127.0.0.1:08080", "http://127.0.0.1:8080", "127.0.0.1"},
		{"http://[::1]:8080", "http://[::1]:8080", "::1"},
		{"http://[::1]:80", "http://[::1]", "::1"},
		{"http://[::1]", "http://[::1]", "::1"},
		{"http://[0:0:0:0:0:0:0:1]:3000", "http://[0:0:0:0:0:0:0:1]:3000", "0:0:0:0:0:0:0:1"},
	}
	for _, c := range cases {
		got, host, ok := normalizeOrigin(c.in)
		if !ok || got != c.want || host != c.host {
			t.Errorf("normalizeOrigin(%q) = %q, %q, %v, want %q, %q, true", c.in, got, host, ok, c.want, c.host)
		}
	}
	bad := []string{
		"", "null", "example.com", "//example.com", "ftp://example.com", "file:///etc/passwd",
		"javascript:alert(1)", "http://", "http://user@example.com", "http://user:pw@example.com",
		"http://example.com/path", "http://example.com?q=1", "http://example.com#f", "http://example.com?",
		"http://example.com:", "http://example.com:0", "http://example.com:65536", "http://example.com:abc",
		"http://[::1", "http://[fe80::1%25eth0]", "http://exa mple.com", "http://example.com:80:80",
	}
	for _, in := range bad {
		if got, _, ok := normalizeOrigin(in); ok {
			t.Errorf("normalizeOrigin(%q) = %q, true, want refused", in, got)
		}
	}
}

func TestOriginRules(t *testing.T) {
	t.Parallel()
	const (
		loop4  = "127.0.0.1"
		loop6  = "::1"
		mapped = "::ffff:127.0.0.1"
		lan    = "10.0.0.5"
	)
	list := []string{"https://ops.example.com", "http://dash.example:3000"}
	cases := []struct {
		name      string
		allowed   []string
		token     string
		publicURL string
		local     string // the server's end of the connection
		host      string // Host header
		origins   []string
		want      bool
	}{
		// No Origin: not a browser page.
		{"no origin, token, loopback", nil, "t", "", loop4, "127.0.0.1:8080", nil, true},
		{"no origin, allowlist", list, "", "", lan, "worker:8080", nil, true},
		{"no origin, untokened loopback", nil, "", "", loop4, "127.0.0.1:8080", nil, true},
		// Malformed and opaque origins.
		{"null origin untokened lan", nil, "", "", lan, "worker:8080", []string{"null"}, false},
		{"null origin token", nil, "t", "", lan, "worker:8080", []string{"null"}, false},
		{"null origin allowlist", list, "", "", lan, "worker:8080", []string{"null"}, false},
		{"origin with path", nil, "", "", lan, "worker:8080", []string{"http://dash.example/x"}, false},
		{"file origin", nil, "", "", lan, "worker:8080", []string{"file://"}, false},
		{"two origin headers", nil, "", "", lan, "worker:8080", []string{"http://a.example", "http://b.example"}, false},
		// Non-empty allowlist: strict, token or not.
		{"listed, token", list, "t", "", lan, "worker:8080", []string{"https://ops.example.com"}, true},
		{"listed, untokened", list, "", "", lan, "worker:8080", []string{"http://dash.example:3000"}, true},
		{"listed after normalising", list, "t", "", lan, "worker:8080", []string{"HTTPS://OPS.Example.com:443"}, true},
		{"listed host other port", list, "t", "", lan, "worker:8080", []string{"https://ops.example.com:8443"}, false},
		{"listed host other scheme", list, "", "", lan, "worker:8080", []string{"http://ops.example.com"}, false},
		{"unlisted, untokened", list, "", "", lan, "worker:8080", []string{"http://evil.example"}, false},
		{"own origin not listed", list, "t", "", lan, "worker:8080", []string{"http://worker:8080"}, false},
		{"listed page to loopback worker", list, "", "", loop4, "127.0.0.1:8080", []string{"https://ops.example.com"}, true},
		// Token, empty list: own origin only.
		{"token same origin", nil, "t", "", lan, "worker.example:8080", []string{"http://worker.example:8080"}, true},
		{"token same origin any case", nil, "t", "", lan, "Worker.Example:8080", []string{"http://WORKER.example:8080"}, true},
		{"token same origin default port", nil, "t", "", lan, "worker.example", []string{"http://worker.example:80"}, true},
		{"token cross origin", nil, "t", "", lan, "worker.example:8080", []string{"http://dash.example"}, false},
		{"token other port", nil, "t", "", lan, "worker.example:8080", []string{"http://worker.example:8081"}, false},
		{"token https not own", nil, "t", "", lan, "worker.example:8080", []string{"https://worker.example:8080"}, false},
		{"token localhost vs 127.0.0.1", nil, "t", "", loop4, "127.0.0.1:8080", []string{"http://localhost:8080"}, false},
		{"token ipv6 same origin", nil, "t", "", loop6, "[::1]:8080", []string{"http://[::1]:8080"}, true},
		{"token public_url behind proxy", nil, "t", "https://ops.example.com/svc", loop4, "127.0.0.1:8080", []string{"https://ops.example.com"}, true},
		{"token public_url other origin", nil, "t", "https://ops.example.com", loop4, "127.0.0.1:8080", []string{"https://evil.example"}, false},
		// A rebound page matches the Host header; the token it lacks stops it.
		{"token rebound same origin", nil, "t", "", loop4, "evil.example:8080", []string{"http://evil.example:8080"}, true},
		// No token, empty list.
		{"untokened network peers", nil, "", "", lan, "worker.example:8080", []string{"http://dash.example"}, true},
		{"untokened lan ipv6 peers", nil, "", "", "fd00::5", "[fd00::5]:8080", []string{"http://[fd00::9]:3000"}, true},
		{"untokened page to loopback worker", nil, "", "", loop4, "127.0.0.1:8080", []string{"http://evil.example"}, false},
		{"untokened page to localhost worker", nil, "", "", loop4, "localhost:8080", []string{"https://evil.example"}, false},
		{"untokened dns rebinding", nil, "", "", loop4, "evil.example:8080", []string{"http://evil.example:8080"}, false},
		{"untokened tunnel host header", nil, "", "", lan, "localhost:8080", []string{"http://evil.example"}, false},
		{"untokened ipv6 loopback worker", nil, "", "", loop6, "[::1]:8080", []string{"http://evil.example"}, false},
		{"untokened ipv4-mapped loopback", nil, "", "", mapped, "worker:8080", []string{"http://evil.example"}, false},
		{"untokened localhost.evil is not loopback", nil, "", "", loop4, "127.0.0.1:8080", []string{"http://localhost.evil.example"}, false},
		{"untokened loopback page other port", nil, "", "", loop4, "127.0.0.1:8080", []string{"http://localhost:3000"}, true},
		{"untokened 127/8 page", nil, "", "", loop4, "127.0.0.1:8080", []string{"http://127.0.0.2:3000"}, true},
		{"untokened ipv6 loopback page", nil, "", "", loop6, "[::1]:8080", []string{"http://[::1]:3000"}, true},
		{"untokened dot-localhost page", nil, "", "", loop4, "127.0.0.1:8080", []string{"http://app.localhost:3000"}, true},
		{"untokened loopback page to lan worker", nil, "", "", lan, "worker:8080", []string{"http://localhost:3000"}, true},
		{"untokened malformed", nil, "", "", lan, "worker:8080", []string{"http://dash.example:99999"}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := config.Default()
			cfg.UI.AllowedWSOrigins, cfg.UI.AuthToken, cfg.UI.PublicURL = c.allowed, c.token, c.publicURL
			s := &UIServer{cfg: &cfg}
			r := httptest.NewRequest("GET", "/ws", nil)
			r.Host = c.host
			for _, o := range c.origins {
				r.Header.Add("Origin", o)
			}
			local := &net.TCPAddr{IP: net.ParseIP(c.local), Port: 8080}
			r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, local))
			got, reason := s.originCheck(r)
			if got != c.want || reason == "" {
				t.Fatalf("originCheck(origin %q, host %q, local %s) = %v %q, want %v", c.origins, c.host, c.local, got, reason, c.want)
			}
			if s.originAllowed(r) != got {
				t.Fatal("originAllowed disagrees with originCheck")
			}
		})
	}
}

// TestWSHandshakeOriginAndToken applies the origin rule where /ws enforces
// it, on the upgrade, together with the token gate in front of it.
func TestWSHandshakeOriginAndToken(t *testing.T) {
	t.Parallel()
	const token = "ui-secret-0123456789"
	const self = "{self}"
	type row struct {
		name   string
		query  string // appended to /ws
		host   string // Host header; "" = the address dialled
		header []string
		want   int
	}
	groups := []struct {
		name    string
		lan     bool
		allowed []string
		token   string
		rows    []row
	}{
		{"allowlist with token", false, []string{"http://dash.example:3000"}, token, []row{
			{"listed, query token", "?token=" + token, "", []string{"Origin", "http://dash.example:3000"}, 101},
			{"listed, header token", "", "", []string{"Origin", "http://dash.example:3000", "Authorization", "Bearer " + token}, 101},
			{"listed, no token", "", "", []string{"Origin", "http://dash.example:3000"}, 401},
			{"unlisted", "?token=" + token, "", []string{"Origin", "http://evil.example"}, 403},
			{"own origin not listed", "?token=" + token, "", []string{"Origin", self}, 403},
		}},
		{"token empty list", false, nil, token, []row{
			{"same origin, query token", "?token=" + token, "", []string{"Origin", self}, 101},
			{"non-browser, header token", "", "", []string{"Authorization", "Bearer " + token}, 101},
			{"missing token", "", "", []string{"Origin", self}, 401},
			{"wrong token", "?token=nope", "", []string{"Origin", self}, 401},
			{"token only as subprotocol", "", "", []string{"Origin", self, "Sec-WebSocket-Protocol", "bearer." + token}, 401},
			{"cross origin", "?token=" + token, "", []string{"Origin", "http://dash.example:3000"}, 403},
			{"localhost is not 127.0.0.1", "?token=" + token, "", []string{"Origin", "http://localhost:{port}"}, 403},
			{"null origin", "?token=" + token, "", []string{"Origin", "null"}, 403},
		}},
		{"untokened loopback worker", false, nil, "", []row{
			{"no origin", "", "", nil, 101},
			{"same origin", "", "", []string{"Origin", self}, 101},
			{"loopback page", "", "", []string{"Origin", "http://localhost:3000"}, 101},
			{"ipv6 loopback page", "", "", []string{"Origin", "http://[::1]:3000"}, 101},
			{"page not on loopback", "", "", []string{"Origin", "http://evil.example"}, 403},
			{"dns rebinding", "", "evil.example:{port}", []string{"Origin", "http://evil.example:{port}"}, 403},
			{"null origin", "", "", []string{"Origin", "null"}, 403},
			{"malformed origin", "", "", []string{"Origin", "http://evil.example:99999"}, 403},
			{"offered subprotocol is declined, not refused", "", "", []string{"Origin", self, "Sec-WebSocket-Protocol", "chat"}, 101},
		}},
		{"untokened lan worker", true, nil, "", []row{
			{"network peers", "", "", []string{"Origin", "http://dash.example:3000"}, 101},
			{"tunnel host header names localhost", "", "localhost:{port}", []string{"Origin", "http://evil.example"}, 403},
		}},
	}
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) {
			cfg := testConfig(t, "/bin/cat")
			if g.lan {
				cfg.UI.Host = lanIP(t)
				cfg.UI.AllowUnauthenticated = true // off loopback without a token: on purpose
			}
			cfg.UI.AllowedWSOrigins, cfg.UI.AuthToken = g.allowed, g.token
			s := startStack(t, cfg)
			addr := s.ui.Addr()
			_, port := splitPort(addr)
			for _, c := range g.rows {
				t.Run(c.name, func(t *testing.T) {
					header := make([]string, len(c.header))
					for i, v := range c.header {
						header[i] = strings.ReplaceAll(strings.ReplaceAll(v, self, s.uiURL), "{port}", port)
					}
					r := rawUpgrade(t, addr, "/ws"+c.query, strings.ReplaceAll(c.host, "{port}", port), header...)
					if r.status != c.want {
						t.Fatalf("upgrade = %d %s, want %d", r.status, r.body, c.want)
					}
					if c.want == 101 && r.header.Get("Sec-WebSocket-Protocol") != "" {
						t.Errorf("Sec-WebSocket-Protocol = %q, want none selected", r.header.Get("Sec-WebSocket-Protocol"))
					}
					if c.want == 401 && !strings.Contains(r.body, "unauthorized") {
						t.Errorf("401 body = %s", r.body)
					}
				})
			}
		})
	}
}

func splitPort(addr string) (string, string) {
	h, p, _ := net.SplitHostPort(addr)
	return h, p
}
