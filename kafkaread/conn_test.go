package kafkaread

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"svc/worker/kconn"

	"github.com/twmb/franz-go/pkg/kfake"
)

// testPKI is a throwaway CA with a server certificate for 127.0.0.1 and a
// client certificate, written as PEM files into a temp dir.
type testPKI struct {
	caFile, clientCert, clientKey string
	server                        tls.Certificate
	pool                          *x509.CertPool
}

func newPKI(t *testing.T) testPKI {
	t.Helper()
	dir := t.TempDir()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatalf("create CA: %v", err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	issue := func(serial int64, usage x509.ExtKeyUsage, name string) (certPEM, keyPEM []byte) {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
			IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatalf("issue %s: %v", name, err)
		}
		keyDER, _ := x509.MarshalECPrivateKey(key)
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
			pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	}
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatalf("write %s: %v", name, err)
		}
		return p
	}
	srvCert, srvKey := issue(2, x509.ExtKeyUsageServerAuth, "broker")
	server, err := tls.X509KeyPair(srvCert, srvKey)
	if err != nil {
		t.Fatalf("server key pair: %v", err)
	}
	cliCert, cliKey := issue(3, x509.ExtKeyUsageClientAuth, "client")
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return testPKI{
		caFile:     write("ca.pem", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})),
		clientCert: write("client.pem", cliCert),
		clientKey:  write("client-key.pem", cliKey),
		server:     server,
		pool:       pool,
	}
}

// TestConnOptsAgainstKfake produces with kconn.Opts and reads back through a
// Reader, for every protocol and SASL mechanism.
func TestConnOptsAgainstKfake(t *testing.T) {
	t.Parallel()
	pki := newPKI(t)
	serverTLS := &tls.Config{Certificates: []tls.Certificate{pki.server}, MinVersion: tls.VersionTLS12}
	mutualTLS := &tls.Config{Certificates: []tls.Certificate{pki.server}, ClientCAs: pki.pool, ClientAuth: tls.RequireAndVerifyClientCert}
	users := []kfake.Opt{
		kfake.EnableSASL(),
		kfake.Superuser("PLAIN", "plain-user", "plain-pw"),
		kfake.Superuser("SCRAM-SHA-256", "scram256-user", "scram256-pw"),
		kfake.Superuser("SCRAM-SHA-512", "scram512-user", "scram512-pw"),
	}
	saslPlain := newCluster(t, append(users, kfake.SeedTopics(1, topicIn))...)
	saslTLS := newCluster(t, append(users, kfake.SeedTopics(1, topicIn), kfake.TLS(serverTLS))...)
	tlsOnly := newCluster(t, kfake.SeedTopics(1, topicIn), kfake.TLS(serverTLS))
	mtls := newCluster(t, kfake.SeedTopics(1, topicIn), kfake.TLS(mutualTLS))

	tests := []struct {
		name    string
		cluster *kfake.Cluster
		sec     kconn.Security
		wantOK  bool
	}{
		{"SASL_PLAINTEXT PLAIN", saslPlain, kconn.Security{Protocol: "SASL_PLAINTEXT", SASLMechanism: "PLAIN", Username: "plain-user", Password: "plain-pw"}, true},
		{"SASL_PLAINTEXT SCRAM-SHA-256", saslPlain, kconn.Security{Protocol: "SASL_PLAINTEXT", SASLMechanism: "SCRAM-SHA-256", Username: "scram256-user", Password: "scram256-pw"}, true},
		{"SASL_PLAINTEXT SCRAM-SHA-512", saslPlain, kconn.Security{Protocol: "sasl_plaintext", SASLMechanism: "scram-sha-512", Username: "scram512-user", Password: "scram512-pw"}, true},
		{"SASL_PLAINTEXT wrong password", saslPlain, kconn.Security{Protocol: "SASL_PLAINTEXT", SASLMechanism: "SCRAM-SHA-256", Username: "scram256-user", Password: "wrong"}, false},
		{"SSL with CA file", tlsOnly, kconn.Security{Protocol: "SSL", CAFile: pki.caFile}, true},
		{"SSL without CA file rejects the unknown CA", tlsOnly, kconn.Security{Protocol: "SSL"}, false},
		{"SSL mutual TLS", mtls, kconn.Security{Protocol: "SSL", CAFile: pki.caFile, CertFile: pki.clientCert, KeyFile: pki.clientKey}, true},
		{"SSL mutual TLS without client cert", mtls, kconn.Security{Protocol: "SSL", CAFile: pki.caFile}, false},
		{"SASL_SSL SCRAM-SHA-512", saslTLS, kconn.Security{Protocol: "SASL_SSL", SASLMechanism: "SCRAM-SHA-512", Username: "scram512-user", Password: "scram512-pw", CAFile: pki.caFile}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addrs := tt.cluster.ListenAddrs()
			conn := kconn.Conn{Brokers: addrs, Security: tt.sec}
			r, err := New([]AliasSpec{{Name: "source", Kind: KindSource, Topic: topicIn, Conn: conn}}, WithDeadline(2*time.Second))
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			if !tt.wantOK {
				_, err := r.Message(t.Context(), "source", 0, 0, ReadUncommitted)
				t.Logf("Message() = %v", err)
				if !isBrokerError(err) {
					t.Errorf("Message() = %v, want a broker error", err)
				}
				assertNoLeak(t, err, addrs)
				return
			}
			opts, err := kconn.Opts(conn)
			if err != nil {
				t.Fatalf("kconn.Opts: %v", err)
			}
			pr := newProducer(t, nil, opts...)
			produce(t, pr, topicIn, rec(0, time.Now().UnixMilli(), "k", tt.name))
			got, err := r.Message(t.Context(), "source", 0, 0, ReadUncommitted)
			if err != nil || got.Key == nil || *got.Key != "k" {
				t.Errorf("Message() = %+v, %v, want the produced record", got, err)
			}
		})
	}
}
