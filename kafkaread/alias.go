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

// AliasSpec is one readable alias: the topic and cluster it resolves to,
// or, when Unavailable is set, the 404 detail served instead.
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

// BuildAliases resolves source, dlq (default {source topic}_dlq) and one
// alias per sink, in that order; a sink or DLQ with no brokers takes the
// source's whole Conn. A sink named source or dlq is left out and returned
// in shadowed (the caller logs kafka_read_alias_shadowed).
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

// checkResolved marks an alias with no topic or no broker unavailable.
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

// ExposedWithoutAuth returns the available aliases whose security protocol
// is not PLAINTEXT (for kafka_read_exposed_without_ui_auth).
func ExposedWithoutAuth(aliases []AliasSpec) []string {
	var names []string
	for _, a := range aliases {
		if a.Unavailable == "" && a.Conn.Security.EffectiveProtocol() != kconn.ProtocolPlaintext {
			names = append(names, a.Name)
		}
	}
	return names
}
