package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Bounds of the tokens, Kafka names, hosts and connections a config holds,
// also documented with each key.
const (
	MinTokenLength = 16   // ui.auth_token and sources.http.clients[].token, in characters
	MaxTokenLength = 4096 // it travels in a header or a query
	MaxTopicLength = 249  // Kafka's own bound
	MaxGroupLength = 255  // sources.kafka.group (Kafka takes any non-empty string)
	MaxHostLength  = 253  // DNS's bound
	MaxConnections = 1_000_000
)

// checkToken wants MinTokenLength or more visible ASCII characters, which
// a header holds unchanged.
func checkToken(p *problems, key, tok string) {
	switch {
	case strings.TrimSpace(tok) == "":
		p.add(key, "blank: a token of only spaces would let ?token=%%20 in; set %d or more visible characters (e.g. openssl rand -hex 16)", MinTokenLength)
	case len(tok) > MaxTokenLength:
		p.add(key, "%d bytes; at most %d", len(tok), MaxTokenLength)
	case strings.IndexFunc(tok, func(r rune) bool { return r <= ' ' || r > '~' }) >= 0:
		p.add(key, "must be visible ASCII characters only (no space, tab, newline, control or non-ASCII character): it travels in an Authorization header or ?token=")
	case len(tok) < MinTokenLength:
		p.add(key, "%d characters; at least %d (e.g. openssl rand -hex 16)", len(tok), MinTokenLength)
	}
}

func checkTopic(p *problems, key, topic string) {
	if msg := topicProblem(topic); msg != "" {
		p.add(key, "%s", msg)
	}
}

// topicProblem applies Kafka's rules for a topic name; "" when it is one.
func topicProblem(topic string) string {
	switch {
	case topic == "":
		return "required"
	case topic == "." || topic == "..":
		return fmt.Sprintf("%q is not a legal Kafka topic name", topic)
	case len(topic) > MaxTopicLength:
		return fmt.Sprintf("%q is %d characters; a Kafka topic name has at most %d", topic, len(topic), MaxTopicLength)
	}
	for _, c := range topic {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Sprintf("%q is not a legal Kafka topic name: only ASCII letters, digits, '.', '_' and '-' (found %q)", topic, c)
		}
	}
	return ""
}

// checkGroup refuses a group id Kafka would take but no operator means.
func checkGroup(p *problems, key, group string) {
	switch {
	case strings.TrimSpace(group) == "":
		p.add(key, "required when the Kafka source is enabled (a non-blank consumer group id)")
	case !utf8.ValidString(group):
		p.add(key, "must be UTF-8 text")
	case strings.IndexFunc(group, unicode.IsControl) >= 0:
		p.add(key, "%q holds a control character (NUL, newline, tab...)", group)
	case strings.TrimSpace(group) != group:
		p.add(key, "%q starts or ends with a space", group)
	case len(group) > MaxGroupLength:
		p.add(key, "%d bytes; at most %d", len(group), MaxGroupLength)
	}
}

// hostProblem reports why h is not an IP address (IPv6 without brackets)
// or a DNS name; "" when it is one.
func hostProblem(h string) string {
	if h == "" {
		return "empty host"
	}
	if net.ParseIP(h) != nil {
		return ""
	}
	if ip, zone, ok := strings.Cut(h, "%"); ok && zone != "" && strings.Contains(ip, ":") && net.ParseIP(ip) != nil {
		return "" // an IPv6 address with its zone, fe80::1%eth0
	}
	if len(h) > MaxHostLength+1 {
		return fmt.Sprintf("host is %d characters; at most %d", len(h), MaxHostLength)
	}
	for _, label := range strings.Split(strings.TrimSuffix(h, "."), ".") {
		if label == "" || len(label) > 63 {
			return fmt.Sprintf("%q is not a host name or IP address (each dot-separated part is 1-63 characters)", h)
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return fmt.Sprintf("%q is not a host name or IP address (letters, digits, '.', '-' and '_' only; found %q)", h, c)
			}
		}
	}
	return ""
}

// checkBindHost checks a listener's bind host ("" is every interface).
func checkBindHost(p *problems, key, host string) {
	if host == "" {
		return
	}
	if msg := hostProblem(host); msg != "" {
		p.add(key, "%s; want an address such as 127.0.0.1, 0.0.0.0, ::1 or a host name, without port or brackets", msg)
	}
}

// addrProblem reports why s is not host:port; "" when it is.
func addrProblem(s string) string {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return fmt.Sprintf("%q is not host:port (e.g. kafka-1:9092, [::1]:9092)", s)
	}
	if msg := hostProblem(host); msg != "" {
		return fmt.Sprintf("%q: %s", s, msg)
	}
	if !validPort(port) {
		return fmt.Sprintf("%q: port %q is not 1-65535", s, port)
	}
	return ""
}

// validPort reports a port of digits only, 1-65535.
func validPort(port string) bool {
	n, err := strconv.Atoi(port)
	return err == nil && n >= 1 && n <= 65535 && strings.Trim(port, "0123456789") == ""
}

// checkBrokers checks every bootstrap address under key (key[i]).
func checkBrokers(p *problems, key string, brokers []string) {
	for i, b := range brokers {
		if strings.TrimSpace(b) == "" {
			continue // kconn names an empty entry
		}
		if msg := addrProblem(b); msg != "" {
			p.add(fmt.Sprintf("%s[%d]", key, i), "%s", msg)
		}
	}
}

// urlProblem reports why s is not an absolute http(s) URL with a valid
// host and optional port; "" when it is.
func urlProblem(s string) string {
	if len(s) > MaxPeerURLBytes {
		return fmt.Sprintf("%d bytes; at most %d", len(s), MaxPeerURLBytes)
	}
	u, err := url.Parse(s)
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Sprintf("%q is not a URL: %v", s, ue.Err)
	}
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Opaque != "" || u.Host == "" {
		return fmt.Sprintf("%q must be an http:// or https:// URL with a host", s)
	}
	host := u.Host
	if i := strings.LastIndex(host, "]"); strings.HasPrefix(host, "[") && i > 0 {
		host = host[i+1:]
	} else if i := strings.LastIndex(host, ":"); i >= 0 {
		host = host[i:]
	} else {
		host = ""
	}
	if host != "" { // the port part, ":" included
		if port := host[1:]; !validPort(port) {
			return fmt.Sprintf("%q: port %q is not 1-65535", s, port)
		}
	}
	if msg := hostProblem(u.Hostname()); msg != "" {
		return fmt.Sprintf("%q: %s", s, msg)
	}
	return ""
}

// checkURL checks an optional http(s) URL key.
func checkURL(p *problems, key, s string) {
	if s == "" {
		return
	}
	if msg := urlProblem(s); msg != "" {
		p.add(key, "%s", msg)
	}
}

// checkMaxConnections checks a max_connections key (0: from the file limit).
func checkMaxConnections(p *problems, key string, n int) {
	if n != 0 {
		p.between(key, int64(n), 1, MaxConnections)
	}
}
