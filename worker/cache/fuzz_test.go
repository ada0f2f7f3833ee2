package cache

import (
	"encoding/json"
	"testing"
)

// Cursors come from any client of the public peer route.
func FuzzParseCursor(f *testing.F) {
	for _, s := range []string{"", "0123456789abcdef-0", "0123456789abcdef-1700000000000", "x-1", "-", "0123456789abcdef--1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := parseCursor(s)
		if err != nil {
			return
		}
		if s != "" && c.String() != s {
			t.Fatalf("parseCursor(%q) = %q: not its own text", s, c.String())
		}
	})
}

// Pulled rows come from peers: a decoded row always passes CheckRow.
func FuzzWireRow(f *testing.F) {
	f.Add([]byte(`{"key":"k","value":"v","value_encoding":"utf-8","ts_ms":1,"scope":"global","origin":"a"}`))
	f.Add([]byte(`{"key":"k","value":"/wA=","value_encoding":"base64","ts_ms":1,"scope":"cluster","origin":"a"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var w WireRow
		if json.Unmarshal(data, &w) != nil {
			return
		}
		r, err := w.row()
		if err != nil {
			return
		}
		if CheckRow(r.Scope, r.Key, r.Value) != nil {
			t.Fatalf("row() kept %+v", r)
		}
	})
}
