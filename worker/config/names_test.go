package config

import "testing"

// The address, host, URL, topic and token rules take what operators
// write and refuse what would start a worker that never gets ready.
func TestNameRules(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		kind, in string
		ok       bool
	}{
		{"addr", "kafka-1:9092", true},
		{"addr", "[::1]:9092", true},
		{"addr", "10.0.0.7:65535", true},
		{"addr", "broker.example.com.:9092", true},
		{"addr", "my_broker:1", true},
		{"addr", "127.0.0.1:36201:", false},
		{"addr", "kafka-1", false},
		{"addr", ":9092", false},
		{"addr", "kafka-1:0", false},
		{"addr", "kafka-1:65536", false},
		{"addr", "kafka-1:+9092", false},
		{"addr", "kafka 1:9092", false},
		{"addr", "kafka..example:9092", false},
		{"addr", "::1:9092", false},
		{"host", "0.0.0.0", true},
		{"host", "::", true},
		{"host", "fe80::1%eth0", true},
		{"host", "localhost", true},
		{"host", "[::1]", false},
		{"host", "host\x00", false},
		{"host", "a\nb", false},
		{"url", "https://w2.example.com:8080/", true},
		{"url", "http://[::1]:8080", true},
		{"url", "http://w2", true},
		{"url", "http://w2:8080:", false},
		{"url", "http://w2:0", false},
		{"url", "http://:8080", false},
		{"url", "http://w 2/", false},
		{"topic", "orders.v2_in-1", true},
		{"topic", "bad topic", false},
		{"topic", "orders\x00", false},
		{"topic", ".", false},
		{"topic", "..", false},
		{"topic", "...", true},
		{"topic", "ü", false},
	} {
		var msg string
		switch c.kind {
		case "addr":
			msg = addrProblem(c.in)
		case "host":
			msg = hostProblem(c.in)
		case "url":
			msg = urlProblem(c.in)
		case "topic":
			msg = topicProblem(c.in)
		}
		if (msg == "") != c.ok {
			t.Errorf("%s %q: problem %q, want ok=%v", c.kind, c.in, msg, c.ok)
		}
	}
	for _, c := range []struct {
		tok string
		ok  bool
	}{
		{"0123456789abcdef", true},
		{"0123456789abcde", false},
		{"                ", false},
		{"0123456789abcdef ", false},
		{"0123456789\tabcdef", false},
		{"0123456789abcdéf", false},
	} {
		var p problems
		checkToken(&p, "ui.auth_token", c.tok)
		if (len(p) == 0) != c.ok {
			t.Errorf("token %q: %v, want ok=%v", c.tok, p, c.ok)
		}
	}
}
