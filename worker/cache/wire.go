package cache

import (
	"errors"
	"fmt"

	"svc/worker/payload"
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
	Next string    `json:"next"` // the cursor to send as since= next
	More bool      `json:"more"` // the page was cut: ask again at once
}

// Wire encodes a row: its value as UTF-8 text, or base64 when it is not
// valid UTF-8 (payload.Encode).
func (r *Row) Wire() WireRow {
	w := WireRow{Key: r.Key, ValueSize: len(r.Value), TSms: r.TSms, Scope: r.Scope, Origin: r.Origin}
	w.Value, w.ValueEncoding = payload.Encode(r.Value)
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

// row decodes a wire row and checks it against CheckRow. A base64 value
// that cannot fit MaxValueBytes is refused before it is decoded (padding
// makes the bound up to 2 bytes loose).
func (w *WireRow) row() (Row, error) {
	if w.ValueEncoding == payload.Base64 && payload.MaxDecodedLen(w.Value, w.ValueEncoding) > MaxValueBytes+3 {
		return Row{}, ErrValueTooLarge
	}
	v, err := payload.Decode(w.Value, w.ValueEncoding)
	switch {
	case errors.Is(err, payload.ErrUnknownEncoding):
		return Row{}, fmt.Errorf("value_%w", err) // value_encoding "x" is not utf-8 or base64
	case err != nil:
		return Row{}, fmt.Errorf("value %w", err) // value is not valid base64: ...
	}
	r := Row{Scope: w.Scope, Key: w.Key, Value: v, TSms: w.TSms, Origin: w.Origin}
	return r, CheckRow(r.Scope, r.Key, r.Value)
}
