package kafkaread

import (
	"encoding/json"
	"errors"
	"net"
	"testing"
	"time"

	"svc/worker/kconn"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestMessage(t *testing.T) {
	t.Parallel()
	c := newCluster(t, kfake.SeedTopics(2, topicIn))
	pr := newProducer(t, c.ListenAddrs())
	first := rec(0, 1000, "k-1", `{"a":1}`)
	first.Headers = []kgo.RecordHeader{{Key: "h-text", Value: []byte("v")}, {Key: "h-bin", Value: []byte{0xff, 0x00}}, {Key: "h-nil"}}
	produce(t, pr, topicIn,
		first,
		&kgo.Record{Partition: 0, Timestamp: time.UnixMilli(2000), Key: []byte{0xc3, 0x28}, Value: []byte{0x00, 0xff, 0x10}},
		&kgo.Record{Partition: 0, Timestamp: time.UnixMilli(3000), Value: nil},
		rec(1, 4000, "", "p1"),
	)
	r := sourceReader(t, c, topicIn)

	tests := []struct {
		name      string
		partition int32
		offset    int64
		want      string
	}{
		{"utf8 with headers", 0, 0, `{"alias":"source","partition":0,"offset":0,"timestamp_ms":1000,"key":"k-1","key_encoding":"utf-8","payload":"{\"a\":1}","payload_encoding":"utf-8","payload_size_bytes":7,"headers":[{"key":"h-text","value":"v","value_encoding":"utf-8"},{"key":"h-bin","value":"/wA=","value_encoding":"base64"},{"key":"h-nil","value":null,"value_encoding":"utf-8"}]}`},
		{"binary key and payload", 0, 1, `{"alias":"source","partition":0,"offset":1,"timestamp_ms":2000,"key":"wyg=","key_encoding":"base64","payload":"AP8Q","payload_encoding":"base64","payload_size_bytes":3,"headers":[]}`},
		{"null key, empty payload", 0, 2, `{"alias":"source","partition":0,"offset":2,"timestamp_ms":3000,"key":null,"key_encoding":"utf-8","payload":"","payload_encoding":"utf-8","payload_size_bytes":0,"headers":[]}`},
		{"other partition", 1, 0, `{"alias":"source","partition":1,"offset":0,"timestamp_ms":4000,"key":null,"key_encoding":"utf-8","payload":"p1","payload_encoding":"utf-8","payload_size_bytes":2,"headers":[]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := r.Message(t.Context(), "source", tt.partition, tt.offset, ReadUncommitted)
			if err != nil {
				t.Fatalf("Message(%d, %d) error = %v", tt.partition, tt.offset, err)
			}
			b, _ := json.Marshal(got)
			if string(b) != tt.want {
				t.Errorf("Message(%d, %d) = %s, want %s", tt.partition, tt.offset, b, tt.want)
			}
		})
	}
}

func TestMessageErrors(t *testing.T) {
	t.Parallel()
	c := newCluster(t, kfake.SeedTopics(1, topicIn))
	pr := newProducer(t, c.ListenAddrs())
	for i := range 10 {
		produce(t, pr, topicIn, rec(0, int64(1000+i), "", "v"))
	}
	adm := kadm.NewClient(pr)
	del := kadm.Offsets{}
	del.Add(kadm.Offset{Topic: topicIn, Partition: 0, At: 4})
	if _, err := adm.DeleteRecords(t.Context(), del); err != nil {
		t.Fatalf("DeleteRecords: %v", err)
	}
	conn := kconn.Conn{Brokers: c.ListenAddrs()}
	r, err := New([]AliasSpec{
		{Name: "source", Kind: KindSource, Topic: topicIn, Conn: conn},
		{Name: "dlq", Kind: KindDLQ, Unavailable: DetailDLQDisabled},
		{Name: "ghost", Kind: KindSink, Topic: "raw-topic-missing", Conn: conn},
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	tests := []struct {
		name      string
		alias     string
		partition int32
		offset    int64
		want      error
		detail    string
	}{
		{"unknown alias", "nope", 0, 0, ErrNotFound, "alias 'nope': unknown alias"},
		{"unavailable alias", "dlq", 0, 0, ErrNotFound, DetailDLQDisabled},
		{"missing topic", "ghost", 0, 0, ErrNotFound, "alias 'ghost' is not available: its topic does not exist"},
		{"unknown partition", "source", 3, 0, ErrNotFound, "alias 'source' partition 3: unknown partition"},
		{"below deleted low watermark", "source", 0, 2, ErrNotFound, "offset 2 is outside partition 0's range [4, 10)"},
		{"negative offset", "source", 0, -1, ErrNotFound, "offset -1 is outside partition 0's range [4, 10)"},
		{"at high watermark", "source", 0, 10, ErrNotFound, "offset 10 is outside partition 0's range [4, 10)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := r.Message(t.Context(), tt.alias, tt.partition, tt.offset, ReadUncommitted)
			if err == nil || !errors.Is(err, tt.want) || err.Error() != tt.detail {
				t.Fatalf("Message(%s, %d, %d) = %v, want %q (%v)", tt.alias, tt.partition, tt.offset, err, tt.detail, tt.want)
			}
			assertNoLeak(t, err, c.ListenAddrs())
		})
	}
	t.Run("low watermark itself is readable", func(t *testing.T) {
		got, err := r.Message(t.Context(), "source", 0, 4, ReadUncommitted)
		if err != nil || got.Offset != 4 {
			t.Fatalf("Message(source, 0, 4) = %+v, %v, want offset 4", got, err)
		}
	})
	var oor *OutOfRangeError
	if _, err := r.Message(t.Context(), "source", 0, 0, ReadUncommitted); !errors.As(err, &oor) || oor.Low != 4 || oor.High != 10 {
		t.Errorf("Message(source, 0, 0) = %v, want *OutOfRangeError [4, 10)", err)
	}
}

func TestMessageCompacted(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	if err := c.CreateTopic(topicComp, 1, map[string]string{"cleanup.policy": "compact"}); err != nil {
		t.Fatalf("CreateTopic: %v", err)
	}
	pr := newProducer(t, c.ListenAddrs())
	// One batch per record; offset 2 is superseded by 3 and offset 0 by 4.
	// The last batch is never compacted (KAFKA-TESTING gotcha 8).
	// Recent timestamps: kfake applies time retention when it compacts.
	base := time.Now().UnixMilli()
	for i, key := range []string{"a", "b", "c", "c", "a", "d"} {
		produce(t, pr, topicComp, rec(0, base+int64(i), key, key))
	}
	c.Compact()
	r := sourceReader(t, c, topicComp)

	_, err := r.Message(t.Context(), "source", 0, 2, ReadUncommitted)
	var gone *GoneError
	if !errors.As(err, &gone) || gone.Next != 3 || !errors.Is(err, ErrNotFound) {
		t.Fatalf("Message(compacted offset 2) = %v, want *GoneError naming offset 3", err)
	}
	if want := "offset 2 in partition 0 was deleted or compacted; the next surviving offset is 3"; err.Error() != want {
		t.Errorf("Message(compacted offset 2) detail = %q, want %q", err.Error(), want)
	}
	assertNoLeak(t, err, c.ListenAddrs())
	if got, err := r.Message(t.Context(), "source", 0, 3, ReadUncommitted); err != nil || got.Payload != "c" {
		t.Errorf("Message(surviving offset 3) = %+v, %v, want payload c", got, err)
	}
}

func TestMessageBrokerDown(t *testing.T) {
	t.Parallel()
	// A listener that accepts and never answers: the brokers "hang".
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, conn)
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	// A cluster that was closed: connections are refused.
	closed := newCluster(t, kfake.SeedTopics(1, topicIn))
	closedAddrs := closed.ListenAddrs()
	closed.Close()

	const deadline = 500 * time.Millisecond
	for _, tc := range []struct {
		name  string
		addrs []string
	}{
		{"hanging broker", []string{ln.Addr().String()}},
		{"refused connections", closedAddrs},
	} {
		t.Run(tc.name, func(t *testing.T) {
			aliases, _ := BuildAliases(AliasInput{SourceEnabled: true, SourceTopic: topicIn, SourceConn: kconn.Conn{Brokers: tc.addrs}})
			r, err := New(aliases, WithDeadline(deadline))
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			start := time.Now()
			_, err = r.Message(t.Context(), "source", 0, 0, ReadUncommitted)
			elapsed := time.Since(start)
			if !isBrokerError(err) {
				t.Fatalf("Message() = %v, want a broker error", err)
			}
			if elapsed > deadline+time.Second {
				t.Errorf("Message() took %v, want about the %v deadline", elapsed, deadline)
			}
			if tc.name == "hanging broker" && !errors.Is(err, ErrBrokerTimeout) {
				t.Errorf("Message() = %v, want ErrBrokerTimeout", err)
			}
			assertNoLeak(t, err, tc.addrs)
		})
	}
}
