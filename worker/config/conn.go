package config

import "svc/worker/kconn"

// kconn owns the translation of a connection into franz-go options, so the
// consumer, sinks, DLQ and read API all connect the same way.

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
		*p = append(*p, prefix+"."+err.Error())
	}
}
