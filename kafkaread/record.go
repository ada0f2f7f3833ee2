package kafkaread

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"

	"svc/worker/payload"
)

// Record is one Kafka message as the read API serves it (JSON); payloads
// are never redacted; bytes follow payload.Encode.
type Record struct {
	Alias            string   `json:"alias"`
	Partition        int32    `json:"partition"`
	Offset           int64    `json:"offset"`
	TimestampMs      *int64   `json:"timestamp_ms"` // nil: no usable timestamp
	Key              *string  `json:"key"`          // nil: the record has no key
	KeyEncoding      string   `json:"key_encoding"`
	Payload          string   `json:"payload"`
	PayloadEncoding  string   `json:"payload_encoding"`
	PayloadSizeBytes int      `json:"payload_size_bytes"`
	Headers          []Header `json:"headers"` // never nil, so JSON has []
}

// Header is one record header.
type Header struct {
	Key           string  `json:"key"`
	Value         *string `json:"value"` // nil: the header has a null value
	ValueEncoding string  `json:"value_encoding"`
}

// encodeNullable is payload.Encode for nullable bytes: nil gives a nil
// string with the utf-8 encoding.
func encodeNullable(b []byte) (*string, string) {
	if b == nil {
		return nil, payload.UTF8
	}
	s, enc := payload.Encode(b)
	return &s, enc
}

// newRecord converts a fetched record read under alias.
func newRecord(alias string, r *kgo.Record) Record {
	out := Record{
		Alias:            alias,
		Partition:        r.Partition,
		Offset:           r.Offset,
		PayloadSizeBytes: len(r.Value),
		Headers:          make([]Header, 0, len(r.Headers)),
	}
	if ms := r.Timestamp.UnixMilli(); ms > 0 {
		out.TimestampMs = &ms
	}
	out.Key, out.KeyEncoding = encodeNullable(r.Key)
	out.Payload, out.PayloadEncoding = payload.Encode(r.Value)
	for _, h := range r.Headers {
		v, enc := encodeNullable(h.Value)
		out.Headers = append(out.Headers, Header{Key: h.Key, Value: v, ValueEncoding: enc})
	}
	return out
}

// payloadField is where a Record's JSON puts its payload's text (no JSON
// string holds it unescaped).
var payloadField = []byte(`"payload":""`)

// jsonChunk is how much of a payload WriteJSONLine escapes at a time.
const jsonChunk = 32 << 10

// WriteJSONLine writes r as encoding/json's Encoder does, escaping the
// payload a piece at a time so that the line is never held whole.
func (r Record) WriteJSONLine(w io.Writer) error {
	text := r.Payload
	r.Payload = ""
	head, err := json.Marshal(r)
	if err != nil {
		return err
	}
	i := bytes.Index(head, payloadField)
	if i < 0 {
		return errors.New("record JSON without its payload field")
	}
	i += len(payloadField) - 1 // before the closing quote
	if _, err := w.Write(head[:i]); err != nil {
		return err
	}
	for len(text) > 0 {
		n := min(len(text), jsonChunk)
		for n < len(text) && !utf8.RuneStart(text[n]) {
			n++
		}
		esc, err := json.Marshal(text[:n])
		if err != nil {
			return err
		}
		if _, err := w.Write(esc[1 : len(esc)-1]); err != nil {
			return err
		}
		text = text[n:]
	}
	if _, err := w.Write(head[i:]); err != nil {
		return err
	}
	_, err = w.Write([]byte{'\n'})
	return err
}
