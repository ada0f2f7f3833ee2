package httpd

import (
	"net"
	"strings"
	"testing"
)

// TestDNSRebindingRefused: a worker bound to loopback answers only its own
// names; a page on another name that resolves to 127.0.0.1 gets 403 naming
// the key to set, on reads, downloads, probes (a text/plain POST needs no
// preflight) and /ws alike.
func TestDNSRebindingRefused(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, "/bin/cat")
	cfg.UI.AllowedHosts = []string{"ops.internal"}
	cfg.UI.PublicURL = "https://svc-1.example.com"
	s := startStack(t, cfg)
	_, port, _ := net.SplitHostPort(s.ui.Addr())
	for _, host := range []string{"rebind.attacker.example:" + port, "rebind.attacker.example", "127.0.0.1.nip.io:" + port, "[::ffff:10.0.0.1]:" + port} {
		for _, c := range []struct{ method, path, body string }{
			{"GET", "/api/v1/config", ""},
			{"GET", "/api/v1/debug/download-live", ""},
			{"POST", "/api/v1/debug/probe", `{"payload":"x"}`},
			{"GET", "/ws", ""},
			{"GET", "/healthz", ""},
		} {
			r := send(t, c.method, s.uiURL+c.path, host, c.body, "Content-Type", "text/plain")
			if r.status != 403 || !strings.Contains(r.body, "host_not_allowed") || !strings.Contains(r.body, "ui.allowed_hosts") {
				t.Errorf("%s %s with Host %s = %d %s, want 403 host_not_allowed naming ui.allowed_hosts", c.method, c.path, host, r.status, r.body)
			}
		}
	}
	for _, host := range []string{"localhost:" + port, "127.0.0.2:" + port, "[::1]:" + port, "ops.internal:" + port, "OPS.internal", "svc-1.example.com", "app.localhost:" + port} {
		if r := doHost(t, "GET", s.uiURL+"/api/v1/config", host); r.status != 200 {
			t.Errorf("GET /api/v1/config with Host %s = %d %s, want 200", host, r.status, r.body)
		}
	}
}

// TestHostCheckOffWhenNotOnLoopback: a worker bound to a LAN address cannot
// know every name it is reached by; its token guards it.
func TestHostCheckOffWhenNotOnLoopback(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, "/bin/cat")
	cfg.UI.Host = lanIP(t)
	cfg.UI.AllowUnauthenticated = true // off loopback without a token: on purpose
	s := startStack(t, cfg)
	if r := doHost(t, "GET", s.uiURL+"/api/v1/config", "any.name.example"); r.status != 200 {
		t.Errorf("LAN-bound worker, Host any.name.example = %d, want 200", r.status)
	}
}

// TestCrossSiteWritesRefused: a state-changing request a browser sends from
// another site is refused by the /ws origin rule, token or not; same-origin
// pages and clients without Origin (curl) pass; reads are untouched.
func TestCrossSiteWritesRefused(t *testing.T) {
	t.Parallel()
	for _, token := range []string{"", "tok-0123456789abcdef"} {
		cfg := testConfig(t, "/bin/cat")
		cfg.UI.AuthToken = token
		cfg.UI.ConsumePause.Enabled = true
		s := startStack(t, cfg)
		auth := []string{"Content-Type", "text/plain"}
		if token != "" {
			auth = append(auth, "Authorization", "Bearer "+token)
		}
		for _, path := range []string{"/api/v1/debug/probe", "/api/v1/debug/merge", "/api/v1/debug/consume-pause", "/api/v1/debug/consume-resume"} {
			for _, h := range [][]string{
				{"Origin", "https://evil.example"},
				{"Origin", "null"},
				{"Sec-Fetch-Site", "cross-site"},
			} {
				r := send(t, "POST", s.uiURL+path, "", `{"payload":"x"}`, append(append([]string{}, auth...), h...)...)
				if r.status != 403 || !strings.Contains(r.body, "refused") {
					t.Errorf("token %q: POST %s with %s: %s = %d %s, want 403", token, path, h[0], h[1], r.status, r.body)
				}
			}
		}
		if r := send(t, "POST", s.uiURL+"/api/v1/debug/probe", "", `{"payload":"x"}`, append(append([]string{}, auth...), "Origin", s.uiURL, "Sec-Fetch-Site", "same-origin")...); r.status != 200 {
			t.Errorf("token %q: same-origin probe = %d %s, want 200", token, r.status, r.body)
		}
		if r := send(t, "POST", s.uiURL+"/api/v1/debug/probe", "", `{"payload":"x"}`, auth...); r.status != 200 {
			t.Errorf("token %q: probe without Origin (curl) = %d %s, want 200", token, r.status, r.body)
		}
		if r := send(t, "GET", s.uiURL+"/api/v1/identity", "", "", append(append([]string{}, auth...), "Origin", "https://evil.example")...); r.status != 200 {
			t.Errorf("token %q: cross-origin GET identity = %d, want 200 (reads are decided by the token and CORS)", token, r.status)
		}
	}
}

// TestPreflightSkipsTokenOnlyOnCORSRoutes: an OPTIONS preflight needs no
// token on the three CORS routes and nowhere else.
func TestPreflightSkipsTokenOnlyOnCORSRoutes(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, "/bin/cat")
	cfg.UI.AuthToken = "tok-0123456789abcdef"
	s := startStack(t, cfg)
	pre := []string{"Origin", s.uiURL, "Access-Control-Request-Method", "POST"}
	for _, path := range []string{"/api/v1/config", "/api/v1/debug/probe", "/api/v1/debug/download-live", "/api/v1/events"} {
		if r := do(t, "OPTIONS", s.uiURL+path, "", pre...); r.status != 401 {
			t.Errorf("preflight on %s without token = %d %s, want 401", path, r.status, r.body)
		}
	}
	if r := do(t, "OPTIONS", s.uiURL+"/api/v1/debug/trace", "", "Origin", s.uiURL, "Access-Control-Request-Method", "GET"); r.status != 204 {
		t.Errorf("preflight on a CORS route = %d, want 204", r.status)
	}
}

// TestKillSwitchBeforeToken: a switched-off feature answers 403 naming its
// key whatever the token (none, wrong, right).
func TestKillSwitchBeforeToken(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, "/bin/cat")
	cfg.UI.AuthToken = "tok-0123456789abcdef"
	cfg.UI.ProbeEnabled, cfg.UI.MergeEnabled, cfg.UI.KafkaReadEnabled = false, false, false
	s := startStack(t, cfg)
	for _, c := range []struct{ method, path, key string }{
		{"POST", "/api/v1/debug/probe", "ui.probe_enabled"},
		{"POST", "/api/v1/debug/merge", "ui.merge_enabled"},
		{"GET", "/api/v1/debug/kafka/topics", "ui.kafka_read_enabled"},
		{"GET", "/api/v1/debug/kafka/dlq/messages?from_ts=0", "ui.kafka_read_enabled"},
		{"GET", "/api/v1/debug/dlq/records", "ui.kafka_read_enabled"},
		{"POST", "/api/v1/debug/consume-pause", "ui.consume_pause.enabled"},
		{"POST", "/api/v1/debug/consume-resume", "ui.consume_pause.enabled"},
	} {
		for _, tok := range []string{"", "wrong", "tok-0123456789abcdef"} {
			var h []string
			if tok != "" {
				h = []string{"Authorization", "Bearer " + tok}
			}
			r := do(t, c.method, s.uiURL+c.path, `{}`, h...)
			if r.status != 403 || !strings.Contains(r.body, c.key+" is false") {
				t.Errorf("%s %s token %q = %d %s, want 403 naming %s", c.method, c.path, tok, r.status, r.body, c.key)
			}
		}
	}
	if r := do(t, "GET", s.uiURL+"/api/v1/debug/consume-pause", "", "Authorization", "Bearer tok-0123456789abcdef"); r.status != 200 {
		t.Errorf("GET consume-pause with the feature off = %d, want 200", r.status)
	}
}

// TestWrongMethod405: a known API path with another method answers 405
// with Allow; an unknown path 404.
func TestWrongMethod405(t *testing.T) {
	t.Parallel()
	s := startStack(t, testConfig(t, "/bin/cat"))
	for _, c := range []struct{ method, path, allow string }{
		{"POST", "/api/v1/identity", "GET, HEAD"},
		{"DELETE", "/api/v1/config", "GET, HEAD"},
		{"GET", "/api/v1/debug/probe", "POST"},
		{"PUT", "/api/v1/debug/consume-pause", "GET, POST, HEAD"},
	} {
		r := do(t, c.method, s.uiURL+c.path, "")
		if r.status != 405 || r.header.Get("Allow") != c.allow || !strings.Contains(r.body, "method_not_allowed") {
			t.Errorf("%s %s = %d Allow %q %s, want 405 Allow %q", c.method, c.path, r.status, r.header.Get("Allow"), r.body, c.allow)
		}
	}
	if r := do(t, "GET", s.uiURL+"/api/v1/nope", ""); r.status != 404 {
		t.Errorf("unknown API path = %d, want 404", r.status)
	}
}
