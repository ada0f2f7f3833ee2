package kafkaread

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"testing"

	"svc/worker/kconn"
)

func TestBuildAliases(t *testing.T) {
	t.Parallel()
	srcConn := kconn.Conn{Brokers: []string{"src:9092"}, Security: kconn.Security{Protocol: "SASL_SSL", SASLMechanism: "PLAIN", Username: "consumer"}}
	ownConn := kconn.Conn{Brokers: []string{"other:9092"}}
	type alias struct{ name, kind, topic, broker, unavailable string }
	tests := []struct {
		name         string
		in           AliasInput
		want         []alias
		wantShadowed []string
	}{
		{
			name: "source on, default dlq, sinks inherit or not",
			in: AliasInput{SourceEnabled: true, SourceTopic: "in", SourceConn: srcConn, Sinks: []SinkInput{
				{Name: "out", Topic: "results"}, {Name: "far", Topic: "remote", Conn: ownConn},
			}},
			want: []alias{
				{"source", "source", "in", "src:9092", ""},
				{"dlq", "dlq", "in_dlq", "src:9092", ""},
				{"out", "sink", "results", "src:9092", ""},
				{"far", "sink", "remote", "other:9092", ""},
			},
		},
		{
			name: "explicit dlq topic and brokers",
			in:   AliasInput{SourceEnabled: true, SourceTopic: "in", SourceConn: srcConn, DLQTopic: "dead", DLQConn: ownConn},
			want: []alias{{"source", "source", "in", "src:9092", ""}, {"dlq", "dlq", "dead", "other:9092", ""}},
		},
		{
			name: "source off, no dlq topic",
			in:   AliasInput{SourceTopic: "in", SourceConn: srcConn, Sinks: []SinkInput{{Name: "out", Topic: "results", Conn: ownConn}}},
			want: []alias{
				{"source", "source", "in", "src:9092", DetailSourceDisabled},
				{"dlq", "dlq", "", "src:9092", DetailDLQDisabled},
				{"out", "sink", "results", "other:9092", ""},
			},
		},
		{
			name: "source off, dlq topic set",
			in:   AliasInput{DLQTopic: "dead", DLQConn: ownConn},
			want: []alias{{"source", "source", "", "", DetailSourceDisabled}, {"dlq", "dlq", "dead", "other:9092", ""}},
		},
		{
			name: "sinks named source and dlq are shadowed",
			in: AliasInput{SourceEnabled: true, SourceTopic: "in", SourceConn: srcConn, Sinks: []SinkInput{
				{Name: "source", Topic: "a"}, {Name: "dlq", Topic: "b"}, {Name: "ok", Topic: "c"},
			}},
			want: []alias{
				{"source", "source", "in", "src:9092", ""},
				{"dlq", "dlq", "in_dlq", "src:9092", ""},
				{"ok", "sink", "c", "src:9092", ""},
			},
			wantShadowed: []string{"source", "dlq"},
		},
		{
			name: "sink with nowhere to read from",
			in:   AliasInput{DLQTopic: "dead", Sinks: []SinkInput{{Name: "lost", Topic: "t"}}},
			want: []alias{
				{"source", "source", "", "", DetailSourceDisabled},
				{"dlq", "dlq", "dead", "", "alias 'dlq' is not available: no brokers are configured for it"},
				{"lost", "sink", "t", "", "alias 'lost' is not available: no brokers are configured for it"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			aliases, shadowed := BuildAliases(tt.in)
			var got []alias
			for _, a := range aliases {
				got = append(got, alias{a.Name, a.Kind, a.Topic, first(a.Conn.Brokers), a.Unavailable})
			}
			if !reflect.DeepEqual(got, tt.want) || !slices.Equal(shadowed, tt.wantShadowed) {
				t.Errorf("BuildAliases() = %+v, shadowed %v\nwant %+v, shadowed %v", got, shadowed, tt.want, tt.wantShadowed)
			}
		})
	}

	// Inheritance takes the consumer's credentials along with its brokers.
	aliases, _ := BuildAliases(AliasInput{SourceEnabled: true, SourceTopic: "in", SourceConn: srcConn, Sinks: []SinkInput{{Name: "out", Topic: "r"}}})
	if got := aliases[2].Conn.Security.Username; got != "consumer" {
		t.Errorf("inherited sink username = %q, want consumer", got)
	}
	if got := ExposedWithoutAuth(aliases); !slices.Equal(got, []string{"source", "dlq", "out"}) {
		t.Errorf("ExposedWithoutAuth() = %v, want [source dlq out]", got)
	}
	plain, _ := BuildAliases(AliasInput{DLQTopic: "d", DLQConn: ownConn, SourceConn: srcConn})
	if got := ExposedWithoutAuth(plain); len(got) != 0 {
		t.Errorf("ExposedWithoutAuth(plaintext dlq, disabled SASL source) = %v, want none", got)
	}
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

func TestReaderTopics(t *testing.T) {
	t.Parallel()
	aliases, _ := BuildAliases(AliasInput{
		SourceTopic: "raw-topic-in", SourceConn: kconn.Conn{Brokers: []string{"127.0.0.1:9092"}},
		Sinks: []SinkInput{{Name: "out", Topic: "raw-topic-out"}, {Name: "audit", Topic: "raw-topic-audit"}},
	})
	r, err := New(aliases)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	b, _ := json.Marshal(map[string]any{"topics": r.Topics()})
	if want := `{"topics":[{"alias":"out","kind":"sink"},{"alias":"audit","kind":"sink"}]}`; string(b) != want {
		t.Errorf("Topics() JSON = %s, want %s", b, want)
	}
	_, err = r.Message(t.Context(), "source", 0, 0, ReadUncommitted)
	var ue *UnavailableError
	if !errors.As(err, &ue) || err.Error() != DetailSourceDisabled {
		t.Errorf("Message(disabled source) = %v, want %q", err, DetailSourceDisabled)
	}
	empty, _ := New(nil)
	if b, _ := json.Marshal(empty.Topics()); string(b) != "[]" {
		t.Errorf("Topics() of no alias = %s, want []", b)
	}

	badNew := []struct {
		name    string
		aliases []AliasSpec
	}{
		{"duplicate", []AliasSpec{{Name: "a", Unavailable: "x"}, {Name: "a", Unavailable: "y"}}},
		{"no name", []AliasSpec{{Topic: "t"}}},
		{"no topic", []AliasSpec{{Name: "a", Conn: kconn.Conn{Brokers: []string{"b:1"}}}}},
		{"bad conn", []AliasSpec{{Name: "a", Topic: "t", Conn: kconn.Conn{Brokers: []string{"b:1"}, Security: kconn.Security{Protocol: "NOPE"}}}}},
	}
	for _, tt := range badNew {
		if _, err := New(tt.aliases); err == nil {
			t.Errorf("New(%s) = nil error, want an error", tt.name)
		}
	}
}
