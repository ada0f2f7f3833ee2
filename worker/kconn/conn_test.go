package kconn

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestValidate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	existing := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(existing, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.pem")
	tests := []struct {
		name string
		conn Conn
		want []string // one substring per expected error, in order
	}{
		{"empty is valid", Conn{}, nil},
		{"plaintext", Conn{Brokers: []string{"b:9092"}, Security: Security{Protocol: "PLAINTEXT"}}, nil},
		{"sasl ssl complete", Conn{Security: Security{Protocol: "SASL_SSL", SASLMechanism: "SCRAM-SHA-256", Username: "u", CAFile: existing}}, nil},
		{"empty broker entry", Conn{Brokers: []string{"b:9092", " "}}, []string{"brokers[1]"}},
		{"unknown protocol", Conn{Security: Security{Protocol: "TLS"}}, []string{"security.protocol: unknown protocol"}},
		{"sasl without mechanism and username", Conn{Security: Security{Protocol: "SASL_PLAINTEXT"}},
			[]string{"security.sasl_mechanism: required", "security.username: required"}},
		{"unknown mechanism", Conn{Security: Security{Protocol: "SASL_SSL", SASLMechanism: "GSSAPI", Username: "u"}}, []string{"security.sasl_mechanism: unknown mechanism"}},
		{"sasl settings without sasl", Conn{Security: Security{Username: "u"}}, []string{"security.username: set but protocol PLAINTEXT does not use SASL"}},
		{"ssl files missing", Conn{Security: Security{Protocol: "SSL", CAFile: missing, CertFile: missing, KeyFile: missing}},
			[]string{"security.ca_file", "security.cert_file", "security.key_file"}},
		{"ssl file without ssl", Conn{Security: Security{CAFile: existing}}, []string{"security.ca_file: set but protocol PLAINTEXT"}},
		{"cert without key", Conn{Security: Security{Protocol: "SSL", CertFile: existing}}, []string{"cert_file and key_file must be set together"}},
		{"bad client_config", Conn{ClientConfig: map[string]string{"linger.ms": "soon", "acks": "all"}},
			[]string{"client_config.acks: unknown key", `client_config.linger.ms: "soon" is not an integer`}},
		{"everything at once", Conn{Security: Security{Protocol: "SASL_SSL", CAFile: missing}, ClientConfig: map[string]string{"x": "1"}},
			[]string{"security.sasl_mechanism", "security.username", "security.ca_file", "client_config.x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := Validate(tt.conn)
			if len(errs) != len(tt.want) {
				t.Fatalf("Validate() = %v, want %d errors %q", errs, len(tt.want), tt.want)
			}
			for i, err := range errs {
				if !strings.Contains(err.Error(), tt.want[i]) {
					t.Errorf("Validate() error %d = %q, want it to contain %q", i, err, tt.want[i])
				}
			}
			if _, err := Opts(tt.conn); len(errs) > 0 && err == nil {
				t.Errorf("Opts() = nil error, want %v", errs[0])
			}
		})
	}
}

func TestClientConfig(t *testing.T) {
	t.Parallel()
	if got := ClientConfigKeys(); len(got) != 11 || !slices.IsSorted(got) || !slices.Contains(got, "session.timeout.ms") {
		t.Errorf("ClientConfigKeys() = %v, want the 11 documented keys, sorted", got)
	}
	all := map[string]string{
		"client.id": "svc-test", "request.timeout.ms": "5000", "metadata.max.age.ms": "1000",
		"fetch.max.bytes": "1048576", "fetch.max.wait.ms": "200", "linger.ms": "5",
		"max.buffered.records": "1000", "session.timeout.ms": "30000", "heartbeat.interval.ms": "3000",
		"rebalance.timeout.ms": "60000", "enable.metrics.push": "true",
	}
	conn := Conn{Brokers: []string{"127.0.0.1:9"}, ClientConfig: all}
	connOpts, err := Opts(conn)
	if err != nil {
		t.Fatalf("Opts(all keys) = %v", err)
	}
	groupOpts, err := GroupOpts(conn)
	if err != nil || len(groupOpts) != 3 {
		t.Fatalf("GroupOpts(all keys) = %d options, %v, want 3", len(groupOpts), err)
	}
	for _, o := range connOpts {
		if _, ok := o.(kgo.GroupOpt); ok {
			t.Errorf("Opts() returned group option %T", o)
		}
	}
	// Every option combination is accepted by kgo itself.
	for _, opts := range [][]kgo.Opt{connOpts, append(connOpts, append(groupOpts, kgo.ConsumerGroup("g"), kgo.ConsumeTopics("t"))...)} {
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			t.Errorf("kgo.NewClient(translated options) = %v", err)
			continue
		}
		cl.Close()
	}

	bad := []struct {
		key, value, want string
	}{
		{"request.timeout.ms", "50", "client_config.request.timeout.ms: 50 is outside"},
		{"fetch.max.bytes", "1.5", "client_config.fetch.max.bytes: \"1.5\" is not an integer"},
		{"client.id", "", "client_config.client.id: must be"},
		{"heartbeat.interval.ms", "50000", "larger than the session timeout"},
		{"enable.auto.commit", "true", "client_config.enable.auto.commit: unknown key"},
		{"enable.metrics.push", "yes", "client_config.enable.metrics.push: \"yes\" is not true or false"},
	}
	for _, tt := range bad {
		t.Run(tt.key, func(t *testing.T) {
			errs := ValidateClientConfig(map[string]string{tt.key: tt.value})
			if len(errs) != 1 || !strings.Contains(errs[0].Error(), tt.want) {
				t.Errorf("ValidateClientConfig(%s=%q) = %v, want %q", tt.key, tt.value, errs, tt.want)
			}
			if _, err := GroupOpts(Conn{ClientConfig: map[string]string{tt.key: tt.value}}); err == nil {
				t.Errorf("GroupOpts(%s=%q) = nil error", tt.key, tt.value)
			}
		})
	}
}

// TestClientMetricsOffUnlessAsked: KIP-714 client metrics are pushed only
// with client_config enable.metrics.push = "true".
func TestClientMetricsOffUnlessAsked(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cc       map[string]string
		disabled bool
	}{
		{nil, true},
		{map[string]string{"enable.metrics.push": "false"}, true},
		{map[string]string{"enable.metrics.push": "true"}, false},
	} {
		opts, err := Opts(Conn{Brokers: []string{"127.0.0.1:9"}, ClientConfig: tc.cc})
		if err != nil {
			t.Fatal(err)
		}
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			t.Fatal(err)
		}
		if got := cl.OptValue(kgo.DisableClientMetrics); got != tc.disabled {
			t.Errorf("client_config %v: client metrics disabled = %v, want %v", tc.cc, got, tc.disabled)
		}
		cl.Close()
	}
}
