package kafkaread

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"svc/worker/payload"
)

func TestNewRecord(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   *kgo.Record
		want string
	}{
		{"no timestamp", &kgo.Record{Timestamp: time.UnixMilli(-1), Key: []byte{}, Value: []byte("x")},
			`{"alias":"a","partition":0,"offset":0,"timestamp_ms":null,"key":"","key_encoding":"utf-8","payload":"x","payload_encoding":"utf-8","payload_size_bytes":1,"headers":[]}`},
		{"zero time", &kgo.Record{Partition: 2, Offset: 9, Value: []byte{0xff}},
			`{"alias":"a","partition":2,"offset":9,"timestamp_ms":null,"key":null,"key_encoding":"utf-8","payload":"/w==","payload_encoding":"base64","payload_size_bytes":1,"headers":[]}`},
		{"multibyte utf-8 and duplicate headers", &kgo.Record{Timestamp: time.UnixMilli(1), Key: []byte("ключ"), Value: []byte("✓"),
			Headers: []kgo.RecordHeader{{Key: "h", Value: []byte{}}, {Key: "h", Value: []byte{0x80}}}},
			`{"alias":"a","partition":0,"offset":0,"timestamp_ms":1,"key":"ключ","key_encoding":"utf-8","payload":"✓","payload_encoding":"utf-8","payload_size_bytes":3,"headers":[{"key":"h","value":"","value_encoding":"utf-8"},{"key":"h","value":"gA==","value_encoding":"base64"}]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := json.Marshal(newRecord("a", tt.in))
			if err != nil || string(b) != tt.want {
				t.Errorf("newRecord() JSON = %s, %v, want %s", b, err, tt.want)
			}
		})
	}
}

// FuzzNewRecord checks that any bytes round-trip through the served form.
func FuzzNewRecord(f *testing.F) {
	f.Add([]byte("key"), []byte("value"), []byte("h"))
	f.Add([]byte{0xff, 0xfe}, []byte{}, []byte{0xc3, 0x28})
	f.Fuzz(func(t *testing.T, key, value, header []byte) {
		r := newRecord("a", &kgo.Record{Key: key, Value: value, Headers: []kgo.RecordHeader{{Key: "h", Value: header}}})
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatalf("json.Marshal: %v", err)
		}
		var back Record
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatalf("json.Unmarshal(%s): %v", b, err)
		}
		for _, c := range []struct {
			name     string
			orig     []byte
			text     *string
			encoding string
		}{
			{"key", key, back.Key, back.KeyEncoding},
			{"payload", value, &back.Payload, back.PayloadEncoding},
			{"header", header, back.Headers[0].Value, back.Headers[0].ValueEncoding},
		} {
			if c.orig == nil {
				if c.text != nil {
					t.Errorf("%s nil served as %q", c.name, *c.text)
				}
				continue
			}
			got, err := payload.Decode(*c.text, c.encoding)
			if err != nil {
				t.Fatalf("%s %q: %v", c.name, *c.text, err)
			}
			if !bytes.Equal(got, c.orig) {
				t.Errorf("%s %x served as %q (%s)", c.name, c.orig, *c.text, c.encoding)
			}
		}
		if back.PayloadSizeBytes != len(value) {
			t.Errorf("payload_size_bytes = %d, want %d", back.PayloadSizeBytes, len(value))
		}
	})
}

func TestErrorClasses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		err  error
		want error
	}{
		{fmt.Errorf("alias 'x': %w", ErrUnknownAlias), ErrNotFound},
		{fmt.Errorf("alias 'x' partition 1: %w", ErrUnknownPartition), ErrNotFound},
		{&UnavailableError{Alias: "dlq", Detail: DetailDLQDisabled}, ErrNotFound},
		{&OutOfRangeError{Partition: 0, Offset: 57, Low: 10, High: 50}, ErrNotFound},
		{&GoneError{Partition: 0, Offset: 3, Next: 5}, ErrNotFound},
		{&brokerError{op: "read", alias: "x", kind: ErrBrokerTimeout}, ErrBrokerTimeout},
		{&brokerError{op: "read", alias: "x", kind: ErrBrokerFailure}, ErrBrokerFailure},
	}
	for _, tt := range tests {
		if !errors.Is(tt.err, tt.want) {
			t.Errorf("errors.Is(%v, %v) = false, want true", tt.err, tt.want)
		}
	}
	if errors.Is(&brokerError{op: "read", alias: "x", kind: ErrBrokerFailure}, ErrNotFound) {
		t.Error("a broker error matches ErrNotFound")
	}
	if got, want := (&OutOfRangeError{Partition: 0, Offset: 57, Low: 10, High: 50}).Error(), "offset 57 is outside partition 0's range [10, 50)"; got != want {
		t.Errorf("OutOfRangeError.Error() = %q, want %q", got, want)
	}
}

// TestRecordWriteJSONLine: a record written a piece at a time is the
// line encoding/json's Encoder writes, byte for byte, whatever the
// payload (HTML characters, line separators, NUL bytes, runes across the
// pieces' bounds, bytes that are not UTF-8).
func TestRecordWriteJSONLine(t *testing.T) {
	ts := int64(1700000000000)
	key := "k<&>"
	val := "v\u2028"
	payloads := []string{
		"",
		`{"a":"<b>&amp;</b>"}`,
		strings.Repeat("\x00", 100<<10),
		strings.Repeat("é", 40<<10), // 2-byte runes over several pieces
		"x" + strings.Repeat("\U0001F600", 20<<10), // 4-byte runes, shifted by one
		strings.Repeat("a\u2028b\u2029", 10<<10),
		"bad \xff\xfe utf-8 \xe2\x82",
		`"payload":""`,
	}
	for i, p := range payloads {
		for _, rec := range []Record{
			{Alias: "source", Partition: 3, Offset: 17, TimestampMs: &ts, Key: &key, KeyEncoding: "utf-8", Payload: p, PayloadEncoding: "utf-8", PayloadSizeBytes: len(p),
				Headers: []Header{{Key: "h", Value: &val, ValueEncoding: "utf-8"}, {Key: "n", ValueEncoding: "utf-8"}}},
			{Alias: "dlq", Payload: p, PayloadEncoding: "base64", Headers: []Header{}},
		} {
			var want, got bytes.Buffer
			if err := json.NewEncoder(&want).Encode(rec); err != nil {
				t.Fatal(err)
			}
			if err := rec.WriteJSONLine(&got); err != nil {
				t.Fatalf("payload %d: %v", i, err)
			}
			if !bytes.Equal(got.Bytes(), want.Bytes()) {
				t.Fatalf("payload %d: WriteJSONLine differs from json.Encoder (%d vs %d bytes)", i, got.Len(), want.Len())
			}
		}
	}
}
