package cache

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"svc/worker/payload"
)

// A row's value crosses the wire as UTF-8 text (a NUL included) or base64
// and comes back as the same bytes.
func TestWireRoundTrip(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		value []byte
		enc   string
	}{
		{"text", []byte("1.0842"), payload.UTF8},
		{"NUL in valid UTF-8", []byte("a\x00b"), payload.UTF8},
		{"not UTF-8", []byte{0, 1, 0xff}, payload.Base64},
		{"empty", []byte{}, payload.UTF8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Row{Scope: ScopeGlobal, Key: "k", Value: tc.value, TSms: 1, Origin: "w1"}
			w := r.Wire()
			if w.ValueEncoding != tc.enc || w.ValueSize != len(tc.value) {
				t.Errorf("Wire() = %q %s %d bytes, want %s %d bytes", w.Value, w.ValueEncoding, w.ValueSize, tc.enc, len(tc.value))
			}
			back, err := w.row()
			if err != nil || !bytes.Equal(back.Value, tc.value) {
				t.Errorf("row() = %x, %v, want %x", back.Value, err, tc.value)
			}
		})
	}
}

// A peer's row with a bad value is refused with an error that names the
// JSON key at fault.
func TestWireRowRefusesBadValues(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, value, enc string
		want             string
		is               error
	}{
		{"unknown encoding", "v", "hex", `value_encoding "hex" is not utf-8 or base64`, payload.ErrUnknownEncoding},
		{"missing encoding", "v", "", `value_encoding "" is not utf-8 or base64`, payload.ErrUnknownEncoding},
		{"bad base64", "!!", payload.Base64, "value is not valid base64: illegal base64 data at input byte 0", nil},
		{"base64 over the bound", strings.Repeat("A", (MaxValueBytes/3+2)*4), payload.Base64, ErrValueTooLarge.Error(), ErrValueTooLarge},
		{"text over the bound", strings.Repeat("v", MaxValueBytes+1), payload.UTF8, ErrValueTooLarge.Error(), ErrValueTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := WireRow{Key: "k", Value: tc.value, ValueEncoding: tc.enc, TSms: 1, Scope: ScopeGlobal, Origin: "w1"}
			_, err := w.row()
			if err == nil || err.Error() != tc.want {
				t.Errorf("row() error = %v, want %s", err, tc.want)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("row() error = %v, want one matching %v", err, tc.is)
			}
		})
	}
}
