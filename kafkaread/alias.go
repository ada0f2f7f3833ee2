package kafkaread

import (
	"fmt"

	"svc/worker/kconn"
)

// Alias kinds.
const (
	KindSource = "source"
	KindDLQ    = "dlq"
	KindSink   = "sink"
)

// Reserved alias names; a sink with one of these names is shadowed.
const (
	AliasSource = "source"
	AliasDLQ    = "dlq"
)

// Unavailable details of the reserved aliases, shown verbatim to operators.
const (
	DetailSourceDisabled = "alias 'source' is not available: the Kafka source is disabled"
	DetailDLQDisabled    = "alias 'dlq' is not available: the DLQ is disabled (set dlq.topic)"
)

// AliasSpec is one readable alias: a name clients use instead of the raw
// topic, the topic and cluster it resolves to, and, when Unavailable is
// non-empty, the 404 detail served instead of reading.
type AliasSpec struct {
	Name        string
	Kind        string // KindSource, KindDLQ or KindSink
	Topic       string
	Conn        kconn.Conn
	Unavailable string
}

// SinkInput is one configured Kafka sink instance.
type SinkInput struct {
	Name  string
	Topic string
	Conn  kconn.Conn // empty Brokers: inherit the source's Conn
}

// AliasInput is the part of the worker config that alias resolution needs.
type AliasInput struct {
	SourceEnabled bool       // sources.kafka.enabled
	SourceTopic   string     // sources.kafka.topic
	SourceConn    kconn.Conn // the consumer's brokers, security and client_config
	DLQTopic      string     // dlq.topic; empty means {SourceTopic}_dlq
	DLQConn       kconn.Conn // empty Brokers: inherit SourceConn
	Sinks         []SinkInput
}

// BuildAliases resolves the aliases: `source` (available only with the Kafka
// source on), `dlq` (dlq.topic, default {source topic}_dlq, unavailable when
// there is neither a dlq.topic nor a Kafka source) and one alias per sink.
// A sink or DLQ with empty brokers takes the source's whole Conn (brokers and
// credentials). A sink named `source` or `dlq` is left out and its name is
// returned in shadowed so that the caller logs kafka_read_alias_shadowed.
// The result lists source, dlq, then the sinks in input order.
func BuildAliases(in AliasInput) (aliases []AliasSpec, shadowed []string) {
	src := AliasSpec{Name: AliasSource, Kind: KindSource, Topic: in.SourceTopic, Conn: in.SourceConn}
	if !in.SourceEnabled {
		src.Unavailable = DetailSourceDisabled
	}
	aliases = append(aliases, checkResolved(src))

	dlq := AliasSpec{Name: AliasDLQ, Kind: KindDLQ, Topic: in.DLQTopic, Conn: inherit(in.DLQConn, in.SourceConn)}
	switch {
	case in.DLQTopic != "":
	case in.SourceEnabled:
		dlq.Topic = in.SourceTopic + "_dlq"
	default:
		dlq.Unavailable = DetailDLQDisabled
	}
	aliases = append(aliases, checkResolved(dlq))

	for _, s := range in.Sinks {
		if s.Name == AliasSource || s.Name == AliasDLQ {
			shadowed = append(shadowed, s.Name)
			continue
		}
		sink := AliasSpec{Name: s.Name, Kind: KindSink, Topic: s.Topic, Conn: inherit(s.Conn, in.SourceConn)}
		aliases = append(aliases, checkResolved(sink))
	}
	return aliases, shadowed
}

// inherit returns own, or the source's Conn when own names no broker.
func inherit(own, source kconn.Conn) kconn.Conn {
	if len(own.Brokers) == 0 {
		return source
	}
	return own
}

// checkResolved marks an otherwise available alias unavailable when it
// resolved to no topic or no broker, so that it answers 404 instead of
// failing every read.
func checkResolved(a AliasSpec) AliasSpec {
	switch {
	case a.Unavailable != "":
	case a.Topic == "":
		a.Unavailable = fmt.Sprintf("alias '%s' is not available: no topic is configured for it", a.Name)
	case len(a.Conn.Brokers) == 0:
		a.Unavailable = fmt.Sprintf("alias '%s' is not available: no brokers are configured for it", a.Name)
	}
	return a
}

// ExposedWithoutAuth returns the names of available aliases whose security
// protocol is not PLAINTEXT. The caller logs kafka_read_exposed_without_ui_auth
// naming them when the read API is on and ui.auth_token is empty.
func ExposedWithoutAuth(aliases []AliasSpec) []string {
	var names []string
	for _, a := range aliases {
		if a.Unavailable == "" && a.Conn.Security.EffectiveProtocol() != kconn.ProtocolPlaintext {
			names = append(names, a.Name)
		}
	}
	return names
}
