package cache

import (
	"encoding/base64"
	"fmt"
	"unicode/utf8"
)

// Value encodings on the wire.
const (
	EncodingUTF8   = "utf-8"
	EncodingBase64 = "base64"
)

// WireRow is one row as the peer route and the debug route send it.
type WireRow struct {
	Key           string `json:"key"`
	Value         string `json:"value"`
	ValueEncoding string `json:"value_encoding"`
	ValueSize     int    `json:"value_size_bytes"`
	TSms          int64  `json:"ts_ms"`
	Scope         string `json:"scope"`
	Origin        string `json:"origin"`
}

// WirePage is the body of GET /api/v1/peer/cache/changes.
type WirePage struct {
	Rows []WireRow `json:"rows"`
	// Next is the cursor to send as since= on the next request.
	Next string `json:"next"`
	// More says the page was cut by the row limit or the byte budget.
	More bool `json:"more"`
}

// Wire encodes a row: its value as UTF-8 text, or base64 when it is not
// valid UTF-8.
func (r *Row) Wire() WireRow {
	w := WireRow{Key: r.Key, Value: string(r.Value), ValueEncoding: EncodingUTF8, ValueSize: len(r.Value), TSms: r.TSms, Scope: r.Scope, Origin: r.Origin}
	if !utf8.Valid(r.Value) {
		w.Value, w.ValueEncoding = base64.StdEncoding.EncodeToString(r.Value), EncodingBase64
	}
	return w
}

// Wire encodes a page.
func (p *Page) Wire() WirePage {
	out := WirePage{Rows: make([]WireRow, 0, len(p.Rows)), Next: p.Next, More: p.More}
	for i := range p.Rows {
		out.Rows = append(out.Rows, p.Rows[i].Wire())
	}
	return out
}

// row decodes a wire row and checks it against CheckRow.
func (w *WireRow) row() (Row, error) {
	var v []byte
	switch w.ValueEncoding {
	case EncodingUTF8:
		v = []byte(w.Value)
	case EncodingBase64:
		if base64.StdEncoding.DecodedLen(len(w.Value)) > MaxValueBytes+3 {
			return Row{}, ErrValueTooLarge
		}
		var err error
		if v, err = base64.StdEncoding.DecodeString(w.Value); err != nil {
			return Row{}, fmt.Errorf("value: %w", err)
		}
	default:
		return Row{}, fmt.Errorf("value_encoding %q is not utf-8 or base64", w.ValueEncoding)
	}
	r := Row{Scope: w.Scope, Key: w.Key, Value: v, TSms: w.TSms, Origin: w.Origin}
	return r, CheckRow(r.Scope, r.Key, r.Value)
}
