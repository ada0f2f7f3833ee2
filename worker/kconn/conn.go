// Package kconn turns a Kafka connection block (brokers, security,
// client_config) into franz-go options. Every Kafka client of the worker
// (consumer, sinks, DLQ, the read API) connects through it, so they all
// accept the same settings and fail on them the same way.
package kconn

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// Security protocols accepted in Security.Protocol (case-insensitive).
const (
	ProtocolPlaintext     = "PLAINTEXT"
	ProtocolSSL           = "SSL"
	ProtocolSASLPlaintext = "SASL_PLAINTEXT"
	ProtocolSASLSSL       = "SASL_SSL"
)

// SASL mechanisms accepted in Security.SASLMechanism (case-insensitive).
const (
	MechanismPlain       = "PLAIN"
	MechanismSCRAMSHA256 = "SCRAM-SHA-256"
	MechanismSCRAMSHA512 = "SCRAM-SHA-512"
)

// Security is a Kafka security block (TOML `security = {...}`). Field names in
// error messages use the TOML keys (security.protocol, security.ca_file, ...).
type Security struct {
	Protocol      string // PLAINTEXT (default when empty) | SSL | SASL_PLAINTEXT | SASL_SSL
	SASLMechanism string // PLAIN | SCRAM-SHA-256 | SCRAM-SHA-512
	Username      string
	Password      string
	CAFile        string // PEM bundle; empty means the system roots
	CertFile      string // PEM client certificate for mTLS, with KeyFile
	KeyFile       string // PEM private key for CertFile
}

// Conn is where and how to reach a cluster. An empty Brokers list is valid in
// configuration (a sink or DLQ then inherits the source's Conn) but not for
// Opts.
type Conn struct {
	Brokers      []string
	Security     Security
	ClientConfig map[string]string // librdkafka-style keys, see ClientConfigKeys
}

// EffectiveProtocol returns the normalised protocol, PLAINTEXT when empty.
func (s Security) EffectiveProtocol() string {
	p := strings.ToUpper(strings.TrimSpace(s.Protocol))
	if p == "" {
		return ProtocolPlaintext
	}
	return p
}

func usesTLS(protocol string) bool { return protocol == ProtocolSSL || protocol == ProtocolSASLSSL }
func usesSASL(protocol string) bool {
	return protocol == ProtocolSASLPlaintext || protocol == ProtocolSASLSSL
}

// Validate reports every problem with c at once, each error naming the
// offending field. Empty Brokers is not an error.
func Validate(c Conn) []error {
	var errs []error
	for i, b := range c.Brokers {
		if strings.TrimSpace(b) == "" {
			errs = append(errs, fmt.Errorf("brokers[%d]: empty broker address", i))
		}
	}
	s := c.Security
	p := s.EffectiveProtocol()
	switch p {
	case ProtocolPlaintext, ProtocolSSL, ProtocolSASLPlaintext, ProtocolSASLSSL:
	default:
		errs = append(errs, fmt.Errorf("security.protocol: unknown protocol %q (want PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL)", s.Protocol))
	}
	if usesSASL(p) {
		switch strings.ToUpper(s.SASLMechanism) {
		case "":
			errs = append(errs, fmt.Errorf("security.sasl_mechanism: required with protocol %s", p))
		case MechanismPlain, MechanismSCRAMSHA256, MechanismSCRAMSHA512:
		default:
			errs = append(errs, fmt.Errorf("security.sasl_mechanism: unknown mechanism %q (want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)", s.SASLMechanism))
		}
		if s.Username == "" {
			errs = append(errs, fmt.Errorf("security.username: required with protocol %s", p))
		}
	} else {
		for _, f := range []struct{ key, value string }{
			{"security.sasl_mechanism", s.SASLMechanism}, {"security.username", s.Username}, {"security.password", s.Password},
		} {
			if f.value != "" {
				errs = append(errs, fmt.Errorf("%s: set but protocol %s does not use SASL", f.key, p))
				break
			}
		}
	}
	files := []struct{ key, path string }{
		{"security.ca_file", s.CAFile}, {"security.cert_file", s.CertFile}, {"security.key_file", s.KeyFile},
	}
	for _, f := range files {
		if f.path == "" {
			continue
		}
		if !usesTLS(p) {
			errs = append(errs, fmt.Errorf("%s: set but protocol %s does not use TLS", f.key, p))
			continue
		}
		if st, err := os.Stat(f.path); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", f.key, err))
		} else if st.IsDir() {
			errs = append(errs, fmt.Errorf("%s: %s is a directory", f.key, f.path))
		}
	}
	if (s.CertFile == "") != (s.KeyFile == "") {
		errs = append(errs, errors.New("security.cert_file: cert_file and key_file must be set together"))
	}
	errs = append(errs, ValidateClientConfig(c.ClientConfig)...)
	return errs
}

// Opts returns kgo options for c: seed brokers, TLS, SASL, and the
// non-group client_config keys (group ones are GroupOpts'). The error names
// the first bad field.
func Opts(c Conn) ([]kgo.Opt, error) {
	if errs := Validate(c); len(errs) > 0 {
		return nil, errs[0]
	}
	if len(c.Brokers) == 0 {
		return nil, errors.New("brokers: no broker address configured")
	}
	opts := []kgo.Opt{kgo.SeedBrokers(c.Brokers...)}
	p := c.Security.EffectiveProtocol()
	if usesTLS(p) {
		tc, err := tlsConfig(c.Security)
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.DialTLSConfig(tc))
	}
	if usesSASL(p) {
		opts = append(opts, kgo.SASL(mechanism(c.Security)))
	}
	cc, err := clientConfigOpts(c.ClientConfig, false)
	if err != nil {
		return nil, err
	}
	// KIP-714 client metrics are pushed only when asked for: a subscribed
	// client builds compressors holding up to 8 MiB of heap for a few
	// kilobytes of metrics, and the worker exports its own.
	if v, ok := Int(c.ClientConfig, "enable.metrics.push"); !ok || v == 0 {
		opts = append(opts, kgo.DisableClientMetrics())
	}
	return append(opts, cc...), nil
}

// GroupOpts returns the kgo options for the group-only client_config keys,
// which only a group consumer appends to Opts.
func GroupOpts(c Conn) ([]kgo.Opt, error) {
	if errs := ValidateClientConfig(c.ClientConfig); len(errs) > 0 {
		return nil, errs[0]
	}
	return clientConfigOpts(c.ClientConfig, true)
}

// tlsConfig builds the client TLS config from the security block's files.
func tlsConfig(s Security) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if s.CAFile != "" {
		pem, err := os.ReadFile(s.CAFile)
		if err != nil {
			return nil, fmt.Errorf("security.ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("security.ca_file: no PEM certificate in %s", s.CAFile)
		}
		tc.RootCAs = pool
	}
	if s.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(s.CertFile, s.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("security.cert_file: load key pair: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// mechanism maps a validated security block to its SASL mechanism.
func mechanism(s Security) sasl.Mechanism {
	switch strings.ToUpper(s.SASLMechanism) {
	case MechanismSCRAMSHA256:
		return scram.Auth{User: s.Username, Pass: s.Password}.AsSha256Mechanism()
	case MechanismSCRAMSHA512:
		return scram.Auth{User: s.Username, Pass: s.Password}.AsSha512Mechanism()
	default:
		return plain.Auth{User: s.Username, Pass: s.Password}.AsMechanism()
	}
}
