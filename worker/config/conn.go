package config

import (
	"svc/kafkaread"
	"svc/kafkaread/kconn"
)

// The Kafka connection settings are shared with the read API: kafkaread owns
// the translation of a security block and client_config into franz-go
// options, so the consumer, sinks, DLQ and reader all connect the same way.

func (s Security) toKafka() kconn.Security {
	return kconn.Security{
		Protocol: s.Protocol, SASLMechanism: s.SASLMechanism, Username: s.Username, Password: s.Password,
		CAFile: s.CAFile, CertFile: s.CertFile, KeyFile: s.KeyFile,
	}
}

// SourceConn is the consumer's cluster and credentials.
func (c *Config) SourceConn() kconn.Conn {
	k := c.Sources.Kafka
	return kconn.Conn{Brokers: k.Brokers, Security: k.Security.toKafka(), ClientConfig: k.ClientConfig}
}

// inheritConn returns own, or the consumer's whole Conn (brokers and
// credentials) when own names no broker.
func (c *Config) inheritConn(brokers []string, sec Security, cc map[string]string) kconn.Conn {
	if len(brokers) == 0 {
		return c.SourceConn()
	}
	return kconn.Conn{Brokers: brokers, Security: sec.toKafka(), ClientConfig: cc}
}

// SinkConn is sink i's cluster: its own brokers and security block, or the
// consumer's when its brokers are empty.
func (c *Config) SinkConn(i int) kconn.Conn {
	s := c.Sinks.Kafka[i]
	return c.inheritConn(s.Brokers, s.Security, s.ClientConfig)
}

// DLQConn is the DLQ's cluster, inherited like a sink's.
func (c *Config) DLQConn() kconn.Conn {
	return c.inheritConn(c.DLQ.Brokers, c.DLQ.Security, c.DLQ.ClientConfig)
}

// AliasInput is what the Kafka read API needs to resolve its aliases.
func (c *Config) AliasInput() kafkaread.AliasInput {
	in := kafkaread.AliasInput{
		SourceEnabled: c.Sources.Kafka.Enabled, SourceTopic: c.Sources.Kafka.Topic, SourceConn: c.SourceConn(),
		DLQTopic: c.DLQ.Topic,
		DLQConn:  kconn.Conn{Brokers: c.DLQ.Brokers, Security: c.DLQ.Security.toKafka(), ClientConfig: c.DLQ.ClientConfig},
	}
	for _, s := range c.Sinks.Kafka {
		in.Sinks = append(in.Sinks, kafkaread.SinkInput{Name: s.Name, Topic: s.Topic,
			Conn: kconn.Conn{Brokers: s.Brokers, Security: s.Security.toKafka(), ClientConfig: s.ClientConfig}})
	}
	return in
}

// checkSecurity reports every problem of one connection block under prefix.
func checkSecurity(p *problems, prefix string, s Security, cc map[string]string) {
	for _, err := range kconn.Validate(kconn.Conn{Security: s.toKafka(), ClientConfig: cc}) {
		msg := err.Error()
		*p = append(*p, prefix+"."+msg)
	}
}
