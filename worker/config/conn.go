package config

import "svc/worker/kconn"

// The Kafka connection settings are shared with the read API: kconn owns
// the translation of a security block and client_config into franz-go
// options, so the consumer, sinks, DLQ and reader all connect the same way.
// The config hands out kconn.Conn values only; httpd maps them to the read
// API's alias input, so the config never imports kafkaread.

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

// connOf is the connection of a sink or the DLQ: its own, or the
// consumer's when it names no broker.
func (c *Config) connOf(brokers []string, sec Security, cc map[string]string) kconn.Conn {
	brokers, sec, cc = c.inherit(brokers, sec, cc)
	return kconn.Conn{Brokers: brokers, Security: sec.toKafka(), ClientConfig: cc}
}

// SinkConn is sink i's cluster: its own brokers and security block, or the
// consumer's when its brokers are empty.
func (c *Config) SinkConn(i int) kconn.Conn {
	s := c.Sinks.Kafka[i]
	return c.connOf(s.Brokers, s.Security, s.ClientConfig)
}

// DLQConn is the DLQ's cluster, inherited like a sink's.
func (c *Config) DLQConn() kconn.Conn {
	return c.connOf(c.DLQ.Brokers, c.DLQ.Security, c.DLQ.ClientConfig)
}

// checkConn reports every problem of one connection block under prefix.
func checkConn(p *problems, prefix string, brokers []string, s Security, cc map[string]string) {
	for _, err := range kconn.Validate(kconn.Conn{Brokers: brokers, Security: s.toKafka(), ClientConfig: cc}) {
		msg := err.Error()
		*p = append(*p, prefix+"."+msg)
	}
}
