package httpd

import (
	"reflect"
	"testing"

	"svc/kafkaread"
	"svc/worker/config"
	"svc/worker/kconn"
)

// rawConn is a connection block as written, before any inheritance: what
// the read API's alias input held when the config built it.
func rawConn(brokers []string, s config.Security, cc map[string]string) kconn.Conn {
	return kconn.Conn{Brokers: brokers, ClientConfig: cc, Security: kconn.Security{
		Protocol: s.Protocol, SASLMechanism: s.SASLMechanism, Username: s.Username, Password: s.Password,
		CAFile: s.CAFile, CertFile: s.CertFile, KeyFile: s.KeyFile,
	}}
}

// aliasInput hands BuildAliases each block's resolved connection; the
// aliases are the ones the raw blocks resolve to, and a sink or DLQ that
// names no broker reads with the consumer's whole connection.
func TestAliasInput(t *testing.T) {
	t.Parallel()
	sasl := config.Security{Protocol: "SASL_SSL", SASLMechanism: "SCRAM-SHA-512", Username: "consumer", Password: "p", CAFile: "/ca.pem"}
	own := config.Security{Protocol: "SSL", CAFile: "/own-ca.pem", CertFile: "/c.pem", KeyFile: "/k.pem"}
	tests := []struct {
		name string
		tune func(*config.Config)
		// want checks a few resolved aliases by name
		want map[string]kconn.Conn
	}{
		{"sink and dlq inherit the source", func(c *config.Config) {
			c.Sinks.Kafka = []config.KafkaSink{{Name: "results", Topic: "out", Security: own}}
		}, map[string]kconn.Conn{
			"source":  rawConn([]string{"src:9092"}, sasl, map[string]string{"client.id": "x"}),
			"dlq":     rawConn([]string{"src:9092"}, sasl, map[string]string{"client.id": "x"}),
			"results": rawConn([]string{"src:9092"}, sasl, map[string]string{"client.id": "x"}),
		}},
		{"own brokers keep their own block", func(c *config.Config) {
			c.Sinks.Kafka = []config.KafkaSink{{Name: "audit", Topic: "a"},
				{Name: "results", Topic: "out", Brokers: []string{"sink:9093"}, Security: own, ClientConfig: map[string]string{"acks": "all"}}}
			c.DLQ.Topic, c.DLQ.Brokers, c.DLQ.Security = "dead", []string{"dlq:9094"}, own
		}, map[string]kconn.Conn{
			"dlq":     rawConn([]string{"dlq:9094"}, own, nil),
			"audit":   rawConn([]string{"src:9092"}, sasl, map[string]string{"client.id": "x"}),
			"results": rawConn([]string{"sink:9093"}, own, map[string]string{"acks": "all"}),
		}},
		{"own brokers, default protocol", func(c *config.Config) {
			c.Sinks.Kafka = []config.KafkaSink{{Name: "results", Topic: "out", Brokers: []string{"sink:9093"}}}
		}, map[string]kconn.Conn{
			"results": rawConn([]string{"sink:9093"}, config.Security{Protocol: kconn.ProtocolPlaintext}, nil),
		}},
		{"source off", func(c *config.Config) {
			c.Sources.Kafka.Enabled = false
			c.DLQ.Topic = "dead"
			c.Sinks.Kafka = []config.KafkaSink{{Name: "dlq", Topic: "shadowed"}, {Name: "results", Topic: "out"}}
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig(t, "/bin/cat")
			cfg.Sources.Kafka = config.KafkaSource{Enabled: true, Topic: "orders", Group: "g", Brokers: []string{"src:9092"},
				Security: sasl, ClientConfig: map[string]string{"client.id": "x"}}
			tt.tune(cfg)
			cfg.Resolve()

			got, gotShadowed := kafkaread.BuildAliases(aliasInput(cfg))
			raw := kafkaread.AliasInput{
				SourceEnabled: cfg.Sources.Kafka.Enabled, SourceTopic: cfg.Sources.Kafka.Topic,
				SourceConn: rawConn(cfg.Sources.Kafka.Brokers, cfg.Sources.Kafka.Security, cfg.Sources.Kafka.ClientConfig),
				DLQTopic:   cfg.DLQ.Topic, DLQConn: rawConn(cfg.DLQ.Brokers, cfg.DLQ.Security, cfg.DLQ.ClientConfig),
			}
			for _, s := range cfg.Sinks.Kafka {
				raw.Sinks = append(raw.Sinks, kafkaread.SinkInput{Name: s.Name, Topic: s.Topic, Conn: rawConn(s.Brokers, s.Security, s.ClientConfig)})
			}
			want, wantShadowed := kafkaread.BuildAliases(raw)
			if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(gotShadowed, wantShadowed) {
				t.Errorf("BuildAliases(aliasInput()) = %+v %v,\nwant (from the raw blocks) %+v %v", got, gotShadowed, want, wantShadowed)
			}
			for _, a := range got {
				if c, ok := tt.want[a.Name]; ok && !reflect.DeepEqual(a.Conn, c) {
					t.Errorf("alias %s reads with %+v, want %+v", a.Name, a.Conn, c)
				}
			}
		})
	}
}
