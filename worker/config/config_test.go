package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func noEnv(string) (string, bool) { return "", false }

func TestTestdataValidConfigsLoad(t *testing.T) {
	t.Parallel()
	files, _ := filepath.Glob("../../testdata/config/valid/*.toml")
	if len(files) == 0 {
		t.Fatal("no valid configs found")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			if _, err := LoadFile(f); err != nil {
				t.Fatalf("LoadFile(%s) = %v, want nil", f, err)
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	t.Parallel()
	cfg, err := Parse([]byte("[executor]\nbinary_path = \"/bin/cat\"\n[sources.http]\nenabled = true\n[[sources.http.clients]]\nname = \"a\"\ntoken = \"t-0123456789abcdef\"\n"), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"ui.host", cfg.UI.Host, "127.0.0.1"},
		{"ui.port", cfg.UI.Port, 8080},
		{"metrics.port", cfg.Metrics.Port, 9090},
		{"sources.http.port", cfg.Sources.HTTP.Port, 8090},
		{"sources.http.max_concurrent", cfg.Sources.HTTP.MaxConcurrent, 64},
		{"sources.http.max_body_bytes", cfg.Sources.HTTP.MaxBodyBytes, int64(1 << 20)},
		{"clients[0].rpm", cfg.Sources.HTTP.Clients[0].RPM, 600},
		{"offload.max_threads", cfg.Offload.MaxThreads, 2},
		{"io.max_threads", cfg.IO.MaxThreads > 0 && cfg.IO.MaxThreads <= 32, true},
		{"executor.timeout", cfg.Executor.Timeout.D(), 30 * time.Second},
		{"pipeline.max_in_flight", cfg.Pipeline.MaxInFlight, 8 * cfg.Executor.PoolSize},
		{"storage.dir", cfg.Storage.Dir, "/tmp/svc"},
		{"history.merged_retention_days", cfg.History.MergedRetentionDays, 7},
		{"history.live_max_bytes", cfg.History.LiveMaxBytes, int64(128 << 20)},
		{"history.max_bytes", cfg.History.MaxBytes, int64(4 << 30)},
		{"history.max_age", cfg.History.MaxAge.D(), 7 * 24 * time.Hour},
		{"ui.consume_pause.enabled", cfg.UI.ConsumePause.Enabled, false},
		{"ui.probe_enabled", cfg.UI.ProbeEnabled, true},
		{"dlq.on_send_failure", cfg.DLQ.OnSendFailure, "stall"},
		{"sources.kafka.fetch_buffer_bytes", cfg.Sources.Kafka.FetchBufferBytes, int64(2 << 20)},
		{"cache exchange follows cache", cfg.CacheExchangeOn(), false},
		{"dlq topic without kafka", cfg.DLQTopic(), ""},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	host, _ := os.Hostname()
	if cfg.Worker.Name != host {
		t.Errorf("worker.name = %q, want hostname %q", cfg.Worker.Name, host)
	}
}

func TestEnvExpansion(t *testing.T) {
	t.Parallel()
	env := map[string]string{"TOKEN": "abc-0123456789abcdef", "PORT_T": "9999ms"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	cfg, err := Parse([]byte(`
[executor]
binary_path = "/bin/cat"
timeout = "${PORT_T}"
env = { A = "x-${TOKEN}-y", B = "${NOPE:-fallback}" }
[sources.http]
enabled = true
host = "127.0.0.1"
[ui]
auth_token = "${TOKEN}"
`), lookup)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.UI.AuthToken != "abc-0123456789abcdef" || cfg.Executor.Env["A"] != "x-abc-0123456789abcdef-y" || cfg.Executor.Env["B"] != "fallback" {
		t.Errorf("expansion: auth_token=%q env=%v", cfg.UI.AuthToken, cfg.Executor.Env)
	}
	if cfg.Executor.Timeout.D() != 9999*time.Millisecond {
		t.Errorf("executor.timeout = %v, want 9.999s (expanded before typing)", cfg.Executor.Timeout.D())
	}
}

func TestLinkBaseTrailingSlashStripped(t *testing.T) {
	t.Parallel()
	cfg, err := Parse([]byte("[executor]\nbinary_path = \"/bin/cat\"\n[sources.http]\nenabled = true\nhost = \"::1\"\n[ui.link_bases]\ngrafana = \"https://g.example.com//\"\n"), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.UI.LinkBases["grafana"]; got != "https://g.example.com" {
		t.Errorf("link base = %q, want trailing slashes stripped", got)
	}
}

func TestMaskingHidesEverySecretKind(t *testing.T) {
	t.Parallel()
	cfg, err := LoadFile("../../testdata/config/valid/full.toml")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Executor.Env["DB_PASSWORD"] = "pw-env"
	cfg.Sinks.Kafka[0].Security.Password = "sink-pw"
	cfg.Sinks.Kafka[0].ClientConfig = map[string]string{"client.id": "sink-client-id"}
	cfg.DLQ.ClientConfig = map[string]string{"linger.ms": "dlq-linger"}
	secrets := []string{"s3cret-operator-token", "pw", "token-a-0123456789abcdef", "C.UTF-8", "pw-env", "sink-pw", "10000", "sink-client-id", "dlq-linger"}

	m := cfg.Masked()
	views := map[string]string{"toml": cfg.MaskedTOML()}
	js, _ := json.Marshal(m)
	views["json"] = string(js)
	for name, view := range views {
		for _, s := range secrets {
			if strings.Contains(view, `"`+s+`"`) {
				t.Errorf("%s view shows secret %q", name, s)
			}
		}
		for _, keep := range []string{"SCRAM-SHA-512", "session.timeout.ms", "DB_PASSWORD", "127.0.0.1:9092"} {
			if !strings.Contains(view, keep) {
				t.Errorf("%s view lost non-secret %q", name, keep)
			}
		}
	}
	if cfg.UI.AuthToken != "s3cret-operator-token" || cfg.Executor.Env["LANG"] != "C.UTF-8" {
		t.Error("Masked modified the original config")
	}
	if m.Sources.Kafka.Security.Username != "svc" {
		t.Errorf("username masked: %q", m.Sources.Kafka.Security.Username)
	}
}

// TestIsSecretNameAllocs: the recorder asks IsSecretName for every task's
// environment keys (not parallel: AllocsPerRun).
func TestIsSecretNameAllocs(t *testing.T) {
	if n := testing.AllocsPerRun(100, func() { IsSecretName("SVC_KEY_ENCODING") }); n != 0 {
		t.Errorf("IsSecretName of an ASCII name allocates %v times", n)
	}
}

func TestIsSecretName(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]bool{
		"DB_PASSWORD": true, "API_Key": true, "apikey": true, "aws_credentials": true, "auth_TOKEN": true,
		"AWS_SECRET_ACCESS_KEY": true, "SIGNING_KEY": true, "ssh-key": true, "tls.key": true, "private_key_pem": true,
		"HOME": false, "key_file": false, "KEYBOARD": false, "monkey_name": false, "cert_file": false, "username": false,
		// Past the ASCII fast path: a long name, a Unicode one, and the
		// Kelvin sign, which lower-cases to an ASCII k.
		strings.Repeat("LONG_", 20) + "PASSWORD": true, strings.Repeat("long_", 20) + "name": false,
		"PASSWÖRD_TOKEN": true, "GRÜẞE": false, "API_\u212aEY": true, "\u212aEY": true,
	} {
		if got := IsSecretName(name); got != want {
			t.Errorf("IsSecretName(%q) = %v, want %v", name, got, want)
		}
	}
	env := MaskEnv(map[string]string{"DB_PASSWORD": "pw", "HOME": "/root"})
	if env["DB_PASSWORD"] != Mask || env["HOME"] != "/root" {
		t.Errorf("MaskEnv() = %v", env)
	}
}

// TestDockerExampleHasAToken: the container example listens on every
// interface, so it must require a UI token and take it from the
// environment; its only problem on this machine is the executor that the
// example image copies in.
func TestDockerExampleHasAToken(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("../../testdata/docker/svc.toml")
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"SVC_UI_TOKEN": "t0k-0123456789abcdef", "BILLING_TOKEN": "b-0123456789abcdef"}
	_, err = Parse(data, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	var ce *Error
	if !errors.As(err, &ce) || len(ce.Problems) != 1 || !strings.Contains(ce.Problems[0], "executor.binary_path") {
		t.Fatalf("Parse(docker example) = %v, want only the missing executor", err)
	}
	if _, err := Parse(data, func(k string) (string, bool) { v, ok := env[k]; return v, ok && k != "SVC_UI_TOKEN" }); err == nil || !strings.Contains(err.Error(), "SVC_UI_TOKEN is not set") {
		t.Errorf("docker example without SVC_UI_TOKEN = %v, want it refused", err)
	}
	if !strings.Contains(string(data), `host = "0.0.0.0"`) || !strings.Contains(string(data), `auth_token = "${SVC_UI_TOKEN}"`) {
		t.Error("the docker example must listen on 0.0.0.0 with a token from SVC_UI_TOKEN")
	}
}

// Off loopback, a UI needs a token and an ingress needs clients unless
// the operator opts in; loopback stays as easy as it was.
func TestOpenByDefaultRefused(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, toml, want string
	}{
		{"ingress on every interface", "[sources.http]\nenabled = true\n", "sources.http.clients: required when sources.http.host \"0.0.0.0\""},
		{"ingress on an address", "[sources.http]\nenabled = true\nhost = \"10.0.0.5\"\n", "sources.http.clients: required"},
		{"ingress opted in", "[sources.http]\nenabled = true\nallow_unauthenticated = true\n", ""},
		{"ingress with clients", "[sources.http]\nenabled = true\n[[sources.http.clients]]\nname = \"a\"\ntoken = \"t-0123456789abcdef\"\n", ""},
		{"ingress on loopback", "[sources.http]\nenabled = true\nhost = \"127.0.0.2\"\n", ""},
		{"ui on every interface", "[ui]\nhost = \"0.0.0.0\"\n[sources.http]\nenabled = true\nhost = \"::1\"\n", "ui.auth_token: required when ui.host \"0.0.0.0\""},
		{"ui empty host", "[ui]\nhost = \"\"\n[sources.http]\nenabled = true\nhost = \"::1\"\n", "ui.auth_token: required"},
		{"ui with a token", "[ui]\nhost = \"0.0.0.0\"\nauth_token = \"x-0123456789abcdef\"\n[sources.http]\nenabled = true\nhost = \"::1\"\n", ""},
		{"ui opted in", "[ui]\nhost = \"0.0.0.0\"\nallow_unauthenticated = true\n[sources.http]\nenabled = true\nhost = \"::1\"\n", ""},
		{"ui off", "[ui]\nenabled = false\nhost = \"0.0.0.0\"\n[sources.http]\nenabled = true\nhost = \"::1\"\n", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte("[executor]\nbinary_path = \"/bin/cat\"\n"+c.toml), noEnv)
			switch {
			case c.want == "" && err != nil:
				t.Errorf("Parse = %v, want valid", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Errorf("Parse = %v, want an error with %q", err, c.want)
			}
		})
	}
}

// Origin is how worker URLs and fleet.trusted_urls compare: as the
// browser sees origins, and never a wildcard.
func TestOrigin(t *testing.T) {
	t.Parallel()
	cases := []struct{ in, want string }{
		{"http://w2.internal:8080", "http://w2.internal:8080"},
		{"HTTP://W2.Internal:8080/", "http://w2.internal:8080"},
		{"https://w2.example.com:443/some/path", "https://w2.example.com"},
		{"http://w2.example.com:80", "http://w2.example.com"},
		{"https://w2.example.com:80", "https://w2.example.com:80"},
		{"http://[::1]:8080", "http://[::1]:8080"},
		{"http://10.0.0.7:8080", "http://10.0.0.7:8080"},
		{"http://svc_w2:8080", "http://svc_w2:8080"},
		{"ws://w2:8080", ""},
		{"javascript:alert(1)", ""},
		{"http://user:pw@w2:8080", ""},
		{"https://*.example.com", ""},
		{"http://w2 ;x:8080", ""},
		{"http:///nohost", ""},
		{"", ""},
	}
	for _, c := range cases {
		if got := Origin(c.in); got != c.want {
			t.Errorf("Origin(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestTrustedURLsValidation(t *testing.T) {
	t.Parallel()
	cases := []struct{ urls, want string }{
		{`["https://w2.example.com:8443", "http://10.0.0.7:8080/", "http://[::1]:9000"]`, ""},
		{`["w2.example.com:8080"]`, `fleet.trusted_urls[0]: "w2.example.com:8080" must be an origin`},
		{`["https://w2.example.com/ui"]`, `fleet.trusted_urls[0]: "https://w2.example.com/ui" must be an origin`},
		{`["https://ok.example.com", "https://w2.example.com?x=1"]`, `fleet.trusted_urls[1]: "https://w2.example.com?x=1" must be an origin`},
		{`["https://u@w2.example.com"]`, `fleet.trusted_urls[0]`},
		{`["https://*.example.com"]`, `fleet.trusted_urls[0]`},
		{`["https://w2.example.com:0"]`, `fleet.trusted_urls[0]: "https://w2.example.com:0": port 0 is outside 1-65535`},
		{`["https://w2.example.com:70000"]`, `port 70000 is outside 1-65535`},
		{`["https://w2.example.com:"]`, `fleet.trusted_urls[0]`},
	}
	for _, c := range cases {
		t.Run(c.urls, func(t *testing.T) {
			_, err := Parse([]byte("[executor]\nbinary_path = \"/bin/cat\"\n[sources.http]\nenabled = true\nhost = \"127.0.0.1\"\n[fleet]\ntrusted_urls = "+c.urls+"\n"), noEnv)
			switch {
			case c.want == "" && err != nil:
				t.Errorf("Parse = %v, want valid", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Errorf("Parse = %v, want an error with %q", err, c.want)
			}
		})
	}
	many := strings.Repeat(`"http://w:1",`, MaxTrustedURLs+1)
	_, err := Parse([]byte("[executor]\nbinary_path = \"/bin/cat\"\n[sources.http]\nenabled = true\nhost = \"127.0.0.1\"\n[fleet]\ntrusted_urls = ["+many+"]\n"), noEnv)
	if err == nil || !strings.Contains(err.Error(), "fleet.trusted_urls") || !strings.Contains(err.Error(), "at most 256") {
		t.Errorf("Parse with %d trusted URLs = %v, want the bound named", MaxTrustedURLs+1, err)
	}
}

// TestExactlyOnceCommitInterval: in exactly-once mode commit_interval is
// the transaction interval, 100ms unless the file sets it.
func TestExactlyOnceCommitInterval(t *testing.T) {
	t.Parallel()
	base := "[executor]\nbinary_path = \"/bin/cat\"\n[sources.kafka]\nenabled = true\nbrokers = [\"b:9092\"]\ntopic = \"in\"\ngroup = \"g\"\n%s\n[[sinks.kafka]]\nname = \"out\"\ntopic = \"out\"\n"
	for _, c := range []struct {
		lines string
		want  time.Duration
	}{
		{`delivery = "exactly_once"`, 100 * time.Millisecond},
		{"delivery = \"exactly_once\"\ncommit_interval = \"2s\"", 2 * time.Second},
		{``, 5 * time.Second},
	} {
		cfg, err := Parse([]byte(fmt.Sprintf(base, c.lines)), func(string) (string, bool) { return "", false })
		if err != nil {
			t.Fatalf("%q: %v", c.lines, err)
		}
		if got := cfg.Sources.Kafka.CommitInterval.D(); got != c.want {
			t.Errorf("%q: commit_interval = %s, want %s", c.lines, got, c.want)
		}
	}
	// A config built in code (svc demo's) gets the same default from
	// Resolve.
	cfg := Default()
	cfg.Sources.Kafka.Delivery = DeliveryExactlyOnce
	cfg.Resolve()
	if got := cfg.Sources.Kafka.CommitInterval.D(); got != 100*time.Millisecond {
		t.Errorf("Default with exactly_once, resolved: commit_interval = %s, want 100ms", got)
	}
}
