package httpd

import (
	"encoding/json"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// lanIP returns a non-loopback address of this machine, to run a worker
// that is not on loopback, or skips the test.
func lanIP(t *testing.T) string {
	t.Helper()
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && n.IP.IsGlobalUnicast() {
			if ln, err := net.Listen("tcp", net.JoinHostPort(n.IP.String(), "0")); err == nil {
				ln.Close()
				return n.IP.String()
			}
		}
	}
	t.Skip("no non-loopback IPv4 address to bind a worker on")
	return ""
}

func corsHeaders(h http.Header) []string {
	var out []string
	for k := range h {
		if strings.HasPrefix(k, "Access-Control-") {
			out = append(out, k)
		}
	}
	return out
}

func TestCORSOriginTable(t *testing.T) {
	t.Parallel()
	const token = "ui-secret-0123456789"
	const self = "{self}" // replaced by the worker's own origin
	type row struct {
		name    string
		host    string // Host header; "" = the address dialled
		origin  string
		allow   bool
		blocked bool // refused before CORS: a loopback-bound worker does not answer that Host
	}
	groups := []struct {
		name    string
		lan     bool // bind the worker on a non-loopback address
		allowed []string
		token   string
		rows    []row
	}{
		{"allowlist with token", false, []string{"http://dash.example:3000"}, token, []row{
			{"listed", "", "http://dash.example:3000", true, false},
			{"listed after normalising", "", "HTTP://DASH.example:3000", true, false},
			{"unlisted", "", "http://evil.example", false, false},
			{"own origin not listed", "", self, false, false},
		}},
		{"allowlist untokened", false, []string{"http://dash.example:3000"}, "", []row{
			{"listed page to loopback worker", "", "http://dash.example:3000", true, false},
			{"unlisted loopback page", "", "http://localhost:3000", false, false},
		}},
		{"token empty list", false, nil, token, []row{
			{"same origin", "", self, true, false},
			{"cross origin", "", "http://dash.example:3000", false, false},
			{"localhost is not 127.0.0.1", "", "http://localhost:{port}", false, false},
			{"null origin", "", "null", false, false},
		}},
		{"untokened loopback worker", false, nil, "", []row{
			{"loopback page", "", "http://localhost:3000", true, false},
			{"ipv6 loopback page", "", "http://[::1]:3000", true, false},
			{"page not on loopback", "", "http://evil.example", false, false},
			{"dns rebinding", "evil.example:{port}", "http://evil.example:{port}", false, true},
			{"malformed origin", "", "http://evil.example/path", false, false},
			{"null origin", "", "null", false, false},
		}},
		{"untokened lan worker", true, nil, "", []row{
			{"network peers", "", "http://dash.example:3000", true, false},
			{"loopback page", "", "http://localhost:3000", true, false},
			{"tunnel host header names localhost", "localhost:{port}", "http://evil.example", false, false},
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
			_, port, _ := net.SplitHostPort(s.ui.Addr())
			for _, c := range g.rows {
				origin := strings.ReplaceAll(strings.ReplaceAll(c.origin, self, s.uiURL), "{port}", port)
				host := strings.ReplaceAll(c.host, "{port}", port)
				for _, path := range []string{"/api/v1/debug/databases", "/api/v1/debug/trace?task_id=x", "/api/v1/debug/trace-by-label?name=a&value=b"} {
					t.Run(c.name+" "+path, func(t *testing.T) {
						if c.blocked {
							for _, m := range []string{"OPTIONS", "GET"} {
								r := doHost(t, m, s.uiURL+path, host, "Origin", origin)
								if r.status != 403 || !strings.Contains(r.body, "host_not_allowed") || len(corsHeaders(r.header)) > 0 {
									t.Errorf("%s with Host %s = %d %s, want 403 host_not_allowed without CORS headers", m, host, r.status, r.body)
								}
							}
							return
						}
						checkPreflight(t, s.uiURL+path, host, origin, c.allow)
						checkRead(t, s.uiURL+path, host, origin, g.token, c.allow)
					})
				}
			}
		})
	}
}

// checkPreflight sends a preflight without a token (none is needed).
func checkPreflight(t *testing.T, url, host, origin string, allow bool) {
	t.Helper()
	r := doHost(t, "OPTIONS", url, host, "Origin", origin, "Access-Control-Request-Method", "GET", "Access-Control-Request-Headers", "authorization")
	if !slices.Contains(r.header.Values("Vary"), "Origin") {
		t.Errorf("preflight Vary = %q, want Origin", r.header.Values("Vary"))
	}
	if !allow {
		var e ErrorBody
		if r.status != 403 || json.Unmarshal([]byte(r.body), &e) != nil || e.Error != "cors_refused" || e.Detail == "" {
			t.Fatalf("refused preflight = %d %s, want 403 cors_refused", r.status, r.body)
		}
		if h := corsHeaders(r.header); len(h) > 0 {
			t.Errorf("refused preflight sends %v", h)
		}
		return
	}
	want := map[string]string{
		"Access-Control-Allow-Origin":  origin,
		"Access-Control-Allow-Methods": "GET, OPTIONS",
		"Access-Control-Allow-Headers": "Authorization",
		"Access-Control-Max-Age":       "600",
	}
	if r.status != 204 {
		t.Fatalf("preflight = %d %s, want 204", r.status, r.body)
	}
	for k, v := range want {
		if got := r.header.Get(k); got != v {
			t.Errorf("preflight %s = %q, want %q", k, got, v)
		}
	}
	if got := r.header.Get("Access-Control-Allow-Credentials"); got != "" {
		t.Errorf("preflight Access-Control-Allow-Credentials = %q, want none", got)
	}
	if r := doHost(t, "OPTIONS", url, host, "Origin", origin, "Access-Control-Request-Method", "POST"); r.status != 403 {
		t.Errorf("preflight for POST = %d, want 403", r.status)
	}
}

// checkRead reads with the token when one is set: the read is served either
// way, and only an allowed origin gets Access-Control-Allow-Origin.
func checkRead(t *testing.T, url, host, origin, token string, allow bool) {
	t.Helper()
	var auth []string
	if token != "" {
		auth = []string{"Authorization", "Bearer " + token}
		if r := doHost(t, "GET", url, host, "Origin", origin); r.status != 401 {
			t.Errorf("read without token = %d, want 401", r.status)
		}
	}
	r := doHost(t, "GET", url, host, append(auth, "Origin", origin)...)
	if r.status == 401 || r.status == 403 || r.status == 404 {
		t.Fatalf("read = %d %s, want it served", r.status, r.body)
	}
	want := ""
	if allow {
		want = origin
	}
	if got := r.header.Get("Access-Control-Allow-Origin"); got != want {
		t.Errorf("read Access-Control-Allow-Origin = %q, want %q", got, want)
	}
	if !slices.Contains(r.header.Values("Vary"), "Origin") {
		t.Errorf("read Vary = %q, want Origin", r.header.Values("Vary"))
	}
	if got := r.header.Get("Access-Control-Allow-Credentials"); got != "" {
		t.Errorf("read Access-Control-Allow-Credentials = %q, want none", got)
	}
}

func TestCORSOnlyThreeRoutes(t *testing.T) {
	t.Parallel()
	for _, token := range []string{"", "ui-secret-0123456789"} {
		t.Run("token="+token, func(t *testing.T) {
			cfg := testConfig(t, "/bin/cat")
			cfg.UI.AuthToken = token
			cfg.UI.AllowedWSOrigins = []string{"http://localhost:3000"}
			s := startStack(t, cfg)
			origin := "http://localhost:3000"
			auth := []string{"Origin", origin}
			if token != "" {
				auth = append(auth, "Authorization", "Bearer "+token)
			}
			if r := do(t, "GET", s.uiURL+"/api/v1/debug/databases", "", auth...); r.header.Get("Access-Control-Allow-Origin") != origin {
				t.Fatalf("control: databases Access-Control-Allow-Origin = %q, want %q", r.header.Get("Access-Control-Allow-Origin"), origin)
			}
			for _, path := range []string{"/api/v1/identity", "/healthz", "/readyz", "/api/v1/events", "/api/v1/config", "/api/v1/nope", "/ws", "/"} {
				r := do(t, "GET", s.uiURL+path, "", auth...)
				if h := corsHeaders(r.header); len(h) > 0 {
					t.Errorf("GET %s (%d) sends %v", path, r.status, h)
				}
				r = do(t, "OPTIONS", s.uiURL+path, "", "Origin", origin, "Access-Control-Request-Method", "GET")
				if h := corsHeaders(r.header); len(h) > 0 {
					t.Errorf("OPTIONS %s (%d) sends %v", path, r.status, h)
				}
			}
		})
	}
}

func TestCORSOptionsWithoutOrigin(t *testing.T) {
	t.Parallel()
	s := startStack(t, testConfig(t, "/bin/cat"))
	r := do(t, "OPTIONS", s.uiURL+"/api/v1/debug/trace", "")
	if r.status != 204 || r.header.Get("Allow") != "GET, OPTIONS" || len(corsHeaders(r.header)) > 0 {
		t.Fatalf("OPTIONS without Origin = %d Allow %q CORS %v, want 204, Allow, no CORS headers", r.status, r.header.Get("Allow"), corsHeaders(r.header))
	}
}
